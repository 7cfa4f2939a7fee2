package order

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/testenv"
)

// The database renders an order's event itself when a statement writes
// the transition (order_event_json, migration 00026, which payment_settle
// calls): what a webhook receiver or a board reads from it must be what
// the api renders for the same order (orderEvent, encoding/json): every
// key, every value, ids as strings and times as Go writes them. Key order
// and spacing may differ; a JSON reader sees neither.
func TestSettledEventIsTheOneTheAPIRenders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	q := dbsqlc.New()
	user, err := q.UserUpsertByOpenID(ctx, pool, "event")
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.MerchantInsert(ctx, pool, dbsqlc.MerchantInsertParams{Name: "Event", Status: "open", DeliveryFeeFen: 300})
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		options          string // order_items.options
		qty, refunded    int32
		price, packaging int64
		name             string
	}
	for _, c := range []struct {
		name      string
		address   string
		remark    string
		times     string // pay_deadline, created_at, updated_at
		lines     []line
		eventType string
		// acceptBy, acceptThen and applied are the order's accept
		// deadline ("": none).
		acceptBy, acceptThen string
		applied              bool
	}{
		{name: "one plain line", address: `{"name":"Li","phone":"13800000000","detail":"Room 1"}`,
			times: "2026-12-04 10:15:30.123456+00", eventType: "order.paid", acceptBy: "2026-12-04 10:20:30.123456+00", acceptThen: "reject",
			lines: []line{{options: "[]", qty: 1, price: 1200, name: "Rice"}}},
		{name: "options, a location, refunds and text a browser escapes",
			address: `{"name":"王<小>明","phone":"138&0000","detail":"Floor \"3\"\nDoor 2","location":{"lat":31.2304,"lng":121.4737}}`,
			remark:  "<b>no onion</b> & \"less\" salt 🌶\u2028next", times: "2026-12-04 10:15:30.12+00", eventType: "order.accepted",
			acceptBy: "2026-12-04 10:15:00+00", acceptThen: "accept", applied: true,
			lines: []line{
				{options: `[{"choice_id":"7","group":"Size","name":"Large","price_delta_fen":300},{"choice_id":"9","group":"Spice","name":"Hot","price_delta_fen":0}]`,
					qty: 2, refunded: 1, price: 1500, packaging: 100, name: "Noodles (large)"},
				{options: "[]", qty: 3, price: 400, packaging: 50, name: "Bun"},
			}},
		{name: "whole seconds and a sparse address", address: `{"name":"B","detail":"d"}`,
			times: "2026-12-04 10:15:30+00", eventType: "order.paid",
			lines: []line{{options: "[]", qty: 1, price: 800, name: "Tea"}}},
	} {
		var items, packaging int64
		for _, l := range c.lines {
			items += int64(l.qty) * l.price
			packaging += int64(l.qty) * l.packaging
		}
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg,
		    status, items_total_fen, packaging_fee_fen, delivery_fee_fen, total_fen, address, remark, version, pay_deadline, created_at, updated_at,
		    accept_by, accept_then, accept_deadline_applied)
		  VALUES ((SELECT coalesce(max(id), 0) + 1 FROM orders), $1, $2, sha256(convert_to($3, 'UTF8')), sha256(convert_to($3, 'UTF8')), 1, 'SM3',
		    'PAID', $4::bigint, $5::bigint, 300, $4::bigint + $5::bigint + 300, $6, $7, 2,
		    $8::timestamptz + interval '15 minutes', $8::timestamptz, $8::timestamptz,
		    nullif($9, '')::timestamptz, nullif($10, ''), $11)
		  RETURNING id`, user.ID, m.ID, c.name, items, packaging, c.address, c.remark, c.times, c.acceptBy, c.acceptThen, c.applied).Scan(&id); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i, l := range c.lines {
			if _, err := pool.Exec(ctx, `INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen,
			    packaging_fee_fen, refunded_qty, options) VALUES ($1, $2, $3, $4, $5::integer, $6::bigint, $5::integer * $6::bigint, $7, $8, $9)`,
				id, i, 100+i, l.name, l.qty, l.price, l.packaging, l.refunded, l.options); err != nil {
				t.Fatalf("%s: line %d: %v", c.name, i, err)
			}
		}

		row, err := q.OrderGetByID(ctx, pool, id)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := q.OrderItemsByOrder(ctx, pool, id)
		if err != nil {
			t.Fatal(err)
		}
		var addr Address
		if err := json.Unmarshal(row.Address, &addr); err != nil {
			t.Fatal(err)
		}
		ev, err := orderEvent(row, orderFromRow(row, lines, addr), c.eventType, row.Version, row.UpdatedAt)
		if err != nil {
			t.Fatal(err)
		}
		fromGo, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var fromSQL []byte
		if err := pool.QueryRow(ctx, "SELECT order_event_json(o, $2) FROM orders o WHERE id = $1", id, c.eventType).Scan(&fromSQL); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var want, got any
		if err := json.Unmarshal(fromGo, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(fromSQL, &got); err != nil {
			t.Fatalf("%s: the database's event is not JSON: %v\n%s", c.name, err, fromSQL)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the database renders the event otherwise than the api (-api +database):\n%s\napi:      %s\ndatabase: %s",
				c.name, diff, fromGo, fromSQL)
		}
	}
}
