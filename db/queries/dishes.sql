-- name: DishInsert :one
-- Its stock is set next, in the same transaction (StockSpread).
INSERT INTO dishes (merchant_id, name, price_fen, on_sale, category_id, position, image_url, packaging_fee_fen)
VALUES (@merchant_id, @name, @price_fen, @on_sale, sqlc.narg('category_id'), @position, sqlc.narg('image_url'), @packaging_fee_fen)
RETURNING id;

-- name: DishGetByID :one
SELECT * FROM dishes_with_stock WHERE id = @id;

-- name: DishListByMerchant :many
SELECT * FROM dishes_with_stock WHERE merchant_id = @merchant_id ORDER BY position, id;

-- name: DishUpdate :one
-- Compare-and-set on version: a stale version updates nothing.
UPDATE dishes SET
    name       = coalesce(sqlc.narg('name'), name),
    price_fen  = coalesce(sqlc.narg('price_fen'), price_fen),
    on_sale    = coalesce(sqlc.narg('on_sale'), on_sale),
    position   = coalesce(sqlc.narg('position'), position),
    packaging_fee_fen = coalesce(sqlc.narg('packaging_fee_fen'), packaging_fee_fen),
    -- NULL is a value of these two (uncategorised, no image): the flags
    -- say whether to set them.
    category_id = CASE WHEN @set_category::boolean THEN sqlc.narg('category_id') ELSE category_id END,
    image_url   = CASE WHEN @set_image::boolean THEN sqlc.narg('image_url') ELSE image_url END,
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND version = @version
RETURNING id, merchant_id;

-- name: DishOptionsBump :one
-- A change of the dish's options, under compare-and-set on its version:
-- quotes of the old options no longer hold (options_version).
UPDATE dishes SET version = version + 1, options_version = options_version + 1, updated_at = now()
WHERE id = @id AND version = @version
RETURNING id, merchant_id;

-- name: CategoryInsert :one
INSERT INTO categories (merchant_id, name, position)
VALUES (@merchant_id, @name, @position)
RETURNING *;

-- name: CategoryGetByID :one
SELECT * FROM categories WHERE id = @id;

-- name: CategoryListByMerchant :many
SELECT * FROM categories WHERE merchant_id = @merchant_id ORDER BY position, id;

-- name: CategoryUpdate :one
-- Compare-and-set on version: a stale version updates nothing.
UPDATE categories SET
    name       = coalesce(sqlc.narg('name'), name),
    position   = coalesce(sqlc.narg('position'), position),
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: CategoryDelete :execrows
-- Its dishes stay, uncategorised (the foreign key sets their category to
-- NULL).
DELETE FROM categories WHERE id = @id AND version = @version;

-- name: OptionsByDishes :many
-- The option groups and choices of some dishes, in menu order.
SELECT g.dish_id, g.id AS group_id, g.name AS group_name, g.position AS group_position, g.min_choices, g.max_choices,
       c.id AS choice_id, c.name AS choice_name, c.position AS choice_position, c.price_delta_fen, c.available
FROM option_groups g
JOIN option_choices c ON c.group_id = g.id
WHERE g.dish_id = ANY(@dish_ids::bigint[])
ORDER BY g.dish_id, g.position, g.id, c.position, c.id;

-- name: OptionsByMerchant :many
-- The option groups and choices of a merchant's dishes, in menu order.
SELECT g.dish_id, g.id AS group_id, g.name AS group_name, g.position AS group_position, g.min_choices, g.max_choices,
       c.id AS choice_id, c.name AS choice_name, c.position AS choice_position, c.price_delta_fen, c.available
FROM option_groups g
JOIN option_choices c ON c.group_id = g.id
JOIN dishes d ON d.id = g.dish_id
WHERE d.merchant_id = @merchant_id
ORDER BY g.dish_id, g.position, g.id, c.position, c.id;

-- name: OptionGroupsDelete :exec
-- Removes every option group of a dish (and their choices), before the
-- dish's new option set is written.
DELETE FROM option_groups WHERE dish_id = @dish_id;

-- name: OptionGroupInsert :one
INSERT INTO option_groups (id, dish_id, name, position, min_choices, max_choices)
OVERRIDING SYSTEM VALUE
VALUES (coalesce(sqlc.narg('id')::bigint, nextval(pg_get_serial_sequence('option_groups', 'id'))), @dish_id, @name, @position, @min_choices, @max_choices)
RETURNING id;

-- name: OptionChoiceInsert :one
INSERT INTO option_choices (id, group_id, name, position, price_delta_fen, available)
OVERRIDING SYSTEM VALUE
VALUES (coalesce(sqlc.narg('id')::bigint, nextval(pg_get_serial_sequence('option_choices', 'id'))), @group_id, @name, @position, @price_delta_fen, @available)
RETURNING id;

-- name: OptionIDsOfDish :many
-- The ids of a dish's groups and choices, which a new option set may keep.
SELECT g.id AS group_id, c.id AS choice_id FROM option_groups g
LEFT JOIN option_choices c ON c.group_id = g.id
WHERE g.dish_id = @dish_id;
