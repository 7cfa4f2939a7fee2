package main

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm3"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/order"
)

// The option set the tests give a dish: a required size and optional
// extras (at most two).
func testOptions(version int64) map[string]any {
	return map[string]any{"version": version, "groups": []map[string]any{
		{"name": "Size", "min_choices": 1, "max_choices": 1, "choices": []map[string]any{
			{"name": "Regular"}, {"name": "Large", "price_delta_fen": 300},
		}},
		{"name": "Extras", "max_choices": 2, "choices": []map[string]any{
			{"name": "Egg", "price_delta_fen": 150}, {"name": "Tofu", "price_delta_fen": 200}, {"name": "Chili oil"},
		}},
	}}
}

// giveOptions sets testOptions on dish i and returns the choice ids by
// name.
func (sh *shop) giveOptions(t testing.TB, i int) map[string]string {
	t.Helper()
	d := sh.dishes[i]
	r := sh.do(t, sh.apis[0], "PUT", "/admin/v1/dishes/"+d.ID+"/options", sh.admin, testOptions(d.Version))
	if r.status != 200 {
		t.Fatalf("set options: %d %s", r.status, r.body)
	}
	r.json(t, &sh.dishes[i])
	return choiceIDs(sh.dishes[i])
}

func choiceIDs(d catalog.Dish) map[string]string {
	ids := map[string]string{}
	for _, g := range d.Options {
		for _, c := range g.Choices {
			ids[c.Name] = c.ID
		}
	}
	return ids
}

// optionsCart is dish 0 on two lines: a regular one, and a large one
// with an egg; two units of its stock.
func (sh *shop) optionsCart(t testing.TB) map[string]any {
	t.Helper()
	ids := sh.giveOptions(t, 0)
	cart := sh.cart(0)
	cart["items"] = []map[string]any{
		{"dish_id": sh.dishes[0].ID, "qty": 1, "options": []string{ids["Regular"]}},
		{"dish_id": sh.dishes[0].ID, "qty": 1, "options": []string{ids["Egg"], ids["Large"]}},
	}
	return cart
}

// A menu as a shop lays it out: categories in order, dishes in them with
// images and packaging fees, and option groups, all in the public menu;
// bad input changes nothing.
func TestMenuStructure(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 10, 10)
	api := sh.apis[0]
	staff := sh.staffToken(t, "merchant:"+sh.merchantID)

	// A retried create makes one category.
	var mains, drinks catalog.Category
	for range 2 {
		r := sh.doKey(t, api, "POST", "/admin/v1/merchants/"+sh.merchantID+"/categories", staff, "cat-mains", `{"name":"Mains","position":2}`)
		if r.status != 201 {
			t.Fatalf("create category: %d %s", r.status, r.body)
		}
		r.json(t, &mains)
	}
	sh.do(t, api, "POST", "/admin/v1/merchants/"+sh.merchantID+"/categories", staff, map[string]any{"name": "Drinks", "position": 1}).json(t, &drinks)
	if n := sh.count(t, "SELECT count(*) FROM categories"); n != 2 {
		t.Fatalf("%d categories, want 2", n)
	}
	if r := sh.do(t, api, "POST", "/admin/v1/merchants/"+sh.merchantID+"/categories", staff, map[string]any{"name": "Mains"}); r.status != 409 || r.problemType() != "already-exists" {
		t.Errorf("second Mains: %d %s", r.status, r.body)
	}

	other := createMerchant(t, sh.stack, api, "Other Kitchen")
	var foreign catalog.Category
	sh.do(t, api, "POST", "/admin/v1/merchants/"+other+"/categories", sh.admin, map[string]any{"name": "Theirs"}).json(t, &foreign)

	before := snapshot(t, sh.stack)
	for name, body := range map[string]map[string]any{
		"http image":       {"version": sh.dishes[0].Version, "image_url": "http://cdn.example.com/a.jpg"},
		"relative image":   {"version": sh.dishes[0].Version, "image_url": "/a.jpg"},
		"spaced image":     {"version": sh.dishes[0].Version, "image_url": "https://cdn.example.com/a b.jpg"},
		"foreign category": {"version": sh.dishes[0].Version, "category_id": foreign.ID},
		"no category":      {"version": sh.dishes[0].Version, "category_id": "999999"},
		"negative packing": {"version": sh.dishes[0].Version, "packaging_fee_fen": -1},
	} {
		if r := sh.do(t, api, "PATCH", "/admin/v1/dishes/"+sh.dishes[0].ID, staff, body); r.status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.status, r.body)
		}
	}
	for name, groups := range map[string]any{
		"no choices":        []map[string]any{{"name": "Size", "max_choices": 1, "choices": []any{}}},
		"max above choices": []map[string]any{{"name": "Size", "max_choices": 3, "choices": []map[string]any{{"name": "S"}, {"name": "L"}}}},
		"min above max":     []map[string]any{{"name": "Size", "min_choices": 2, "max_choices": 1, "choices": []map[string]any{{"name": "S"}, {"name": "L"}}}},
		"two groups alike":  []map[string]any{{"name": "A", "max_choices": 1, "choices": []map[string]any{{"name": "S"}}}, {"name": "A", "max_choices": 1, "choices": []map[string]any{{"name": "S"}}}},
		"someone's id":      []map[string]any{{"id": "1", "name": "A", "max_choices": 1, "choices": []map[string]any{{"name": "S"}}}},
		"negative delta":    []map[string]any{{"name": "A", "max_choices": 1, "choices": []map[string]any{{"name": "S", "price_delta_fen": -5}}}},
	} {
		if r := sh.do(t, api, "PUT", "/admin/v1/dishes/"+sh.dishes[0].ID+"/options", staff, map[string]any{"version": sh.dishes[0].Version, "groups": groups}); r.status != 400 {
			t.Errorf("options with %s: %d %s, want 400", name, r.status, r.body)
		}
	}
	if after := snapshot(t, sh.stack); after != before {
		t.Errorf("refused changes changed the catalog:\nbefore %s\nafter  %s", before, after)
	}

	var d0 catalog.Dish
	r := sh.do(t, api, "PATCH", "/admin/v1/dishes/"+sh.dishes[0].ID, staff, map[string]any{
		"version": sh.dishes[0].Version, "category_id": mains.ID, "position": 1, "image_url": "https://cdn.example.com/noodles.jpg", "packaging_fee_fen": 100})
	if r.status != 200 {
		t.Fatalf("patch dish: %d %s", r.status, r.body)
	}
	r.json(t, &d0)
	sh.dishes[0] = d0
	ids := sh.giveOptions(t, 0)
	sh.do(t, api, "PATCH", "/admin/v1/dishes/"+sh.dishes[1].ID, staff, map[string]any{"version": sh.dishes[1].Version, "category_id": drinks.ID})

	// The public menu, from the other instance: categories by position,
	// dish 0 with its layout and options.
	var menu catalog.Menu
	sh.do(t, sh.apis[1], "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
	if got := []string{menu.Categories[0].Name, menu.Categories[1].Name}; !cmp.Equal(got, []string{"Drinks", "Mains"}) || len(menu.Categories) != 2 {
		t.Errorf("categories %v, want Drinks then Mains", got)
	}
	m0 := menuDish(t, menu, sh.dishes[0].ID)
	if *m0.CategoryID != mains.ID || *m0.ImageURL != "https://cdn.example.com/noodles.jpg" || m0.PackagingFeeFen != 100 || m0.Position != 1 {
		t.Errorf("dish 0 on the menu: %+v", m0)
	}
	wantGroups := []catalog.OptionGroup{
		{ID: m0.Options[0].ID, Name: "Size", MinChoices: 1, MaxChoices: 1, Required: true, Choices: []catalog.OptionChoice{
			{ID: ids["Regular"], Name: "Regular", Available: true}, {ID: ids["Large"], Name: "Large", PriceDeltaFen: 300, Available: true}}},
		{ID: m0.Options[1].ID, Name: "Extras", MinChoices: 0, MaxChoices: 2, Choices: []catalog.OptionChoice{
			{ID: ids["Egg"], Name: "Egg", PriceDeltaFen: 150, Available: true}, {ID: ids["Tofu"], Name: "Tofu", PriceDeltaFen: 200, Available: true},
			{ID: ids["Chili oil"], Name: "Chili oil", Available: true}}},
	}
	if diff := cmp.Diff(wantGroups, m0.Options); diff != "" {
		t.Errorf("dish 0's options (-want +got):\n%s", diff)
	}

	// Switching Egg off (same ids kept) shows on the menu, and a cart
	// with an egg is refused.
	opts := testOptions(sh.dishes[0].Version)
	groups := opts["groups"].([]map[string]any)
	groups[0]["id"] = m0.Options[0].ID
	groups[1]["id"] = m0.Options[1].ID
	for g, names := range [][]string{{"Regular", "Large"}, {"Egg", "Tofu", "Chili oil"}} {
		for c, name := range names {
			choice := groups[g]["choices"].([]map[string]any)[c]
			choice["id"] = ids[name]
			if name == "Egg" {
				choice["available"] = false
			}
		}
	}
	if r := sh.do(t, api, "PUT", "/admin/v1/dishes/"+sh.dishes[0].ID+"/options", staff, opts); r.status != 200 {
		t.Fatalf("switch Egg off: %d %s", r.status, r.body)
	}
	// The other instance's cache drops the menu when the invalidation
	// reaches it over Redis.
	waitUntil(t, "the other instance to show Egg switched off", func() bool {
		sh.do(t, sh.apis[1], "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
		return !menuDish(t, menu, sh.dishes[0].ID).Options[1].Choices[0].Available
	})
	if got := choiceIDs(menuDish(t, menu, sh.dishes[0].ID)); !cmp.Equal(got, ids) {
		t.Errorf("choice ids moved: %v, want %v", got, ids)
	}
	user := sh.login(t, "menu")
	cart := sh.cart(1)
	cart["items"].([]map[string]any)[0]["options"] = []string{ids["Large"], ids["Egg"]}
	if r := sh.do(t, api, "POST", "/v1/orders/confirm", user, cart); r.status != 409 || r.problemType() != "dish-unavailable" {
		t.Errorf("confirm with a switched-off choice: %d %s", r.status, r.body)
	}

	// Removing a category leaves its dishes, uncategorised.
	if r := sh.do(t, api, "DELETE", "/admin/v1/categories/"+mains.ID+"?version=1", staff, nil); r.status != 204 {
		t.Fatalf("delete category: %d %s", r.status, r.body)
	}
	sh.do(t, api, "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
	if d := menuDish(t, menu, sh.dishes[0].ID); d.CategoryID != nil || len(menu.Categories) != 1 {
		t.Errorf("after deleting Mains: dish category %v, %d categories", d.CategoryID, len(menu.Categories))
	}
}

func menuDish(t testing.TB, m catalog.Menu, id string) catalog.Dish {
	t.Helper()
	for _, d := range m.Dishes {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("dish %s not on the menu", id)
	return catalog.Dish{}
}

// Confirm prices options and packaging; the order keeps them as sold; a
// quote of changed options no longer places an order; carts that break a
// group's rules are refused and change nothing.
func TestOrderWithOptions(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10, 10)
	api := sh.apis[0]
	ids := sh.giveOptions(t, 0)
	r := sh.do(t, api, "PATCH", "/admin/v1/dishes/"+sh.dishes[0].ID, sh.admin, map[string]any{"version": sh.dishes[0].Version, "packaging_fee_fen": 100})
	if r.status != 200 {
		t.Fatalf("packaging fee: %d %s", r.status, r.body)
	}
	r.json(t, &sh.dishes[0])
	user := sh.login(t, "options")

	line := func(qty int, options ...string) map[string]any {
		return map[string]any{"dish_id": sh.dishes[0].ID, "qty": qty, "options": options}
	}
	withLines := func(lines ...map[string]any) map[string]any {
		c := sh.cart(0, 1) // dish 1 (2000 fen, no options, no packaging)
		c["items"] = append(c["items"].([]map[string]any), lines...)
		return c
	}
	before := snapshot(t, sh.stack)
	for name, tt := range map[string]struct {
		cart    map[string]any
		status  int
		problem string
	}{
		"required group missing": {withLines(line(1, ids["Egg"])), 400, "invalid-request"},
		"two sizes":              {withLines(line(1, ids["Regular"], ids["Large"])), 400, "invalid-request"},
		"three extras":           {withLines(line(1, ids["Regular"], ids["Egg"], ids["Tofu"], ids["Chili oil"])), 400, "invalid-request"},
		"another dish's choice":  {withLines(line(1, ids["Regular"], "999999")), 400, "invalid-request"},
		"a choice twice":         {withLines(line(1, ids["Regular"], ids["Regular"])), 400, "invalid-request"},
		"the same line twice":    {withLines(line(1, ids["Regular"]), line(2, ids["Regular"])), 400, "invalid-request"},
		"more than in stock":     {withLines(line(6, ids["Regular"]), line(5, ids["Large"])), 409, "out-of-stock"},
	} {
		if r := sh.do(t, api, "POST", "/v1/orders/confirm", user, tt.cart); r.status != tt.status || r.problemType() != tt.problem {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.body, tt.status, tt.problem)
		}
	}
	if after := snapshot(t, sh.stack); after != before {
		t.Errorf("refused confirms changed the catalog:\nbefore %s\nafter  %s", before, after)
	}

	// Dish 0 (1000 fen, packaging 100) regular x2, and large with egg and
	// tofu x1; dish 1 x1.
	cart := withLines(line(2, ids["Regular"]), line(1, ids["Tofu"], ids["Large"], ids["Egg"]))
	c := sh.confirm(t, api, user, cart)
	want := []order.Item{
		{DishID: sh.dishes[0].ID, Name: "Dish 0", Qty: 2, UnitPriceFen: 1000, LineTotalFen: 2000, PackagingFeeFen: 100,
			Options: []order.ItemOption{{ChoiceID: ids["Regular"], Group: "Size", Name: "Regular"}}},
		{DishID: sh.dishes[0].ID, Name: "Dish 0", Qty: 1, UnitPriceFen: 1650, LineTotalFen: 1650, PackagingFeeFen: 100,
			Options: []order.ItemOption{{ChoiceID: ids["Large"], Group: "Size", Name: "Large", PriceDeltaFen: 300},
				{ChoiceID: ids["Egg"], Group: "Extras", Name: "Egg", PriceDeltaFen: 150}, {ChoiceID: ids["Tofu"], Group: "Extras", Name: "Tofu", PriceDeltaFen: 200}}},
		{DishID: sh.dishes[1].ID, Name: "Dish 1", Qty: 1, UnitPriceFen: 2000, LineTotalFen: 2000, Options: []order.ItemOption{}},
	}
	if mustID(t, sh.dishes[0].ID) > mustID(t, sh.dishes[1].ID) {
		want = append(want[2:], want[:2]...)
	}
	for i := range want {
		want[i].Line = int16(i) //nolint:gosec // G115: three lines
	}
	if diff := cmp.Diff(want, c.Items); diff != "" {
		t.Errorf("quoted lines (-want +got):\n%s", diff)
	}
	if c.ItemsTotalFen != 5650 || c.PackagingFeeFen != 300 || c.DeliveryFeeFen != 500 || c.TotalFen != 6450 {
		t.Errorf("totals: items %d + packaging %d + delivery %d = %d, want 5650 + 300 + 500 = 6450", c.ItemsTotalFen, c.PackagingFeeFen, c.DeliveryFeeFen, c.TotalFen)
	}
	// The same cart listed in another order digests alike.
	shuffled := withLines(line(1, ids["Egg"], ids["Large"], ids["Tofu"]), line(2, ids["Regular"]))
	items := shuffled["items"].([]map[string]any)
	shuffled["items"] = append(items[1:], items[0])
	if again := sh.confirm(t, api, user, shuffled); again.Digest != c.Digest {
		t.Errorf("the same cart in another order digests %s, want %s", again.Digest, c.Digest)
	}

	r = sh.submit(t, api, user, "with-options", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	placed := placedOrder(t, r)
	if diff := cmp.Diff(c.Items, placed.Items); diff != "" || placed.TotalFen != 6450 || placed.PackagingFeeFen != 300 {
		t.Errorf("placed order: total %d, packaging %d, lines (-quoted +placed):\n%s", placed.TotalFen, placed.PackagingFeeFen, diff)
	}
	if sh.stock(t, 0) != 7 || sh.stock(t, 1) != 9 {
		t.Errorf("stock %d and %d, want 7 and 9", sh.stock(t, 0), sh.stock(t, 1))
	}
	if n := sh.count(t, "SELECT qty FROM stock_reservations WHERE dish_id = $1", sh.dishes[0].ID); n != 3 {
		t.Errorf("dish 0 reservation holds %d, want its 3 units over two lines", n)
	}

	// Renaming Egg (same ids) changes the menu, not the order; a quote
	// made before it no longer places an order.
	stale := sh.confirm(t, api, user, withLines(line(1, ids["Large"], ids["Egg"])))
	var dish catalog.Dish
	sh.do(t, api, "GET", "/admin/v1/dishes/"+sh.dishes[0].ID, sh.admin, nil).json(t, &dish)
	opts := renamedOptions(t, dish, "Egg", "Fried egg")
	if r := sh.do(t, api, "PUT", "/admin/v1/dishes/"+dish.ID+"/options", sh.admin, opts); r.status != 200 {
		t.Fatalf("rename Egg: %d %s", r.status, r.body)
	}
	var got order.Order
	sh.do(t, api, "GET", "/v1/orders/"+placed.ID, user, nil).json(t, &got)
	if diff := cmp.Diff(placed.Items, got.Items); diff != "" {
		t.Errorf("the order's lines changed with the menu (-placed +now):\n%s", diff)
	}
	orders := sh.count(t, "SELECT count(*) FROM orders")
	if r := sh.submit(t, api, user, "stale-options", stale.ConfirmToken); r.status != 409 || r.problemType() != "quote-changed" {
		t.Errorf("submit of a quote before the options changed: %d %s", r.status, r.body)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != orders || sh.stock(t, 0) != 7 {
		t.Errorf("the refused submit left %d orders (want %d), stock %d (want 7)", n, orders, sh.stock(t, 0))
	}
}

// renamedOptions is d's option set with the choice named from renamed to,
// every id kept.
func renamedOptions(t testing.TB, d catalog.Dish, from, to string) map[string]any {
	t.Helper()
	var groups []map[string]any
	for _, g := range d.Options {
		var choices []map[string]any
		for _, c := range g.Choices {
			name := c.Name
			if name == from {
				name = to
			}
			choices = append(choices, map[string]any{"id": c.ID, "name": name, "price_delta_fen": c.PriceDeltaFen, "available": c.Available})
		}
		groups = append(groups, map[string]any{"id": g.ID, "name": g.Name, "min_choices": g.MinChoices, "max_choices": g.MaxChoices, "choices": choices})
	}
	b, _ := json.Marshal(groups)
	var out []any
	_ = json.Unmarshal(b, &out)
	return map[string]any{"version": d.Version, "groups": out}
}

// A shop's money rules over HTTP: delivery by distance bands (address
// location required, out of range refused), a minimum order naming the
// shortfall, closures and the closed flag on the menu and at confirm.
func TestShopRules(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 50)
	api := sh.apis[0]
	user := sh.login(t, "rules")
	var m catalog.Merchant
	patch := func(body map[string]any) {
		t.Helper()
		var menu catalog.Menu
		sh.do(t, api, "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
		body["version"] = menu.Merchant.Version
		r := sh.do(t, api, "PATCH", "/admin/v1/merchants/"+sh.merchantID, sh.admin, body)
		if r.status != 200 {
			t.Fatalf("patch merchant %v: %d %s", body, r.status, r.body)
		}
		r.json(t, &m)
	}
	if r := sh.do(t, api, "PATCH", "/admin/v1/merchants/"+sh.merchantID, sh.admin, map[string]any{
		"version": 1, "delivery_bands": []map[string]any{{"up_to_m": 3000, "fee_fen": 300}}}); r.status != 400 {
		t.Errorf("bands without a location: %d %s, want 400", r.status, r.body)
	}
	// Shenzhen Bay: 0.01 degree of latitude is about 1.1 km.
	patch(map[string]any{"location": map[string]float64{"lat": 22.5, "lng": 113.9}, "min_order_fen": 3000,
		"delivery_bands": []map[string]any{{"up_to_m": 3000, "fee_fen": 300}, {"up_to_m": 5000, "fee_fen": 600}}})
	at := func(lat float64, qty int32) map[string]any {
		c := sh.cart(qty)
		c["address"] = map[string]any{"name": "Han Meimei", "phone": "13900139000", "detail": "Unit 3", "location": map[string]float64{"lat": lat, "lng": 113.9}}
		return c
	}
	for _, tt := range []struct {
		name    string
		cart    map[string]any
		status  int
		problem string
		fee     int64
		extra   map[string]any
	}{
		{"1 km away", at(22.509, 3), 200, "", 300, nil},
		{"4 km away", at(22.536, 3), 200, "", 600, nil},
		{"8 km away", at(22.572, 3), 409, "out-of-range", 0, map[string]any{"max_distance_m": 5000.0}},
		{"no location", sh.cart(3), 400, "invalid-request", 0, map[string]any{"field": "address.location"}},
		{"below the minimum", at(22.509, 2), 409, "below-minimum", 0, map[string]any{"shortfall_fen": 1000.0, "min_order_fen": 3000.0}},
	} {
		r := sh.do(t, api, "POST", "/v1/orders/confirm", user, tt.cart)
		if r.status != tt.status || r.problemType() != tt.problem {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.status, r.body, tt.status, tt.problem)
			continue
		}
		var got map[string]any
		r.json(t, &got)
		for k, v := range tt.extra {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", tt.name, k, got[k], v)
			}
		}
		if tt.status == 200 && got["delivery_fee_fen"] != float64(tt.fee) {
			t.Errorf("%s: delivery fee %v, want %d", tt.name, got["delivery_fee_fen"], tt.fee)
		}
	}
	// A quoted cart placed at its distance's fee.
	c := sh.confirm(t, api, user, at(22.536, 3))
	if r := sh.submit(t, api, user, "rules-4km", c.ConfirmToken); r.status != 201 || placedOrder(t, r).DeliveryFeeFen != 600 || placedOrder(t, r).TotalFen != 3600 {
		t.Errorf("submit at 4 km: %d %s", r.status, r.body)
	}

	// Closed today in its time zone: the menu says so and when it opens;
	// confirm answers merchant-closed with the same time.
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	// Closed today and the next two days (so that a midnight during the
	// test changes nothing): it opens at midnight of the third.
	now := time.Now().In(shanghai)
	var closures []string
	for d := range 3 {
		closures = append(closures, time.Date(now.Year(), now.Month(), now.Day()+d, 12, 0, 0, 0, shanghai).Format(time.DateOnly))
	}
	reopens := time.Date(now.Year(), now.Month(), now.Day()+3, 0, 0, 0, 0, shanghai)
	patch(map[string]any{"closed_dates": closures})
	var menu catalog.Menu
	sh.do(t, api, "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
	if menu.OpenNow || menu.NextOpenAt == nil || !menu.NextOpenAt.Equal(reopens) {
		t.Errorf("menu on a closed day: open_now %v, next_open_at %v, want false and %v", menu.OpenNow, menu.NextOpenAt, reopens)
	}
	r := sh.do(t, api, "POST", "/v1/orders/confirm", user, at(22.509, 3))
	var closed map[string]any
	r.json(t, &closed)
	if r.status != 409 || r.problemType() != "merchant-closed" || closed["next_open_at"] != reopens.UTC().Format(time.RFC3339) {
		t.Errorf("confirm on a closed day: %d %s, want merchant-closed naming %s", r.status, r.body, reopens.UTC().Format(time.RFC3339))
	}
	patch(map[string]any{"closed_dates": []string{}})
	sh.do(t, api, "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
	if !menu.OpenNow || menu.NextOpenAt != nil {
		t.Errorf("menu with no closure: open_now %v, next_open_at %v", menu.OpenNow, menu.NextOpenAt)
	}
	// The closed flag wins over hours: closed, with no time to name.
	patch(map[string]any{"status": "closed"})
	sh.do(t, api, "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
	if menu.OpenNow || menu.NextOpenAt != nil {
		t.Errorf("menu of a closed merchant: open_now %v, next_open_at %v", menu.OpenNow, menu.NextOpenAt)
	}
}

// A genuine confirm token of a form before this one (v1 before options,
// v2 before vouchers, v3 before promotions, v4 before pickup and slots) is answered 410, as an expired one, and places
// nothing.
func TestOutdatedTokenIsGone(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	user := sh.login(t, "outdated")
	c := sh.confirm(t, sh.apis[0], user, sh.cart(1))
	parts := strings.Split(c.ConfirmToken, ".")
	if len(parts) != 3 || parts[0] != "v5" {
		t.Fatalf("token %q is not v5.<payload>.<mac>", c.ConfirmToken)
	}
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		signed := v + "." + parts[1]
		mac := hmac.New(sm3.New, []byte(sh.env["TAKEOUT_CONFIRM_SECRET"]))
		mac.Write([]byte(signed))
		old := signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
		r := sh.submit(t, sh.apis[0], user, "outdated-"+v, old)
		if r.status != 410 || r.problemType() != "confirm-token-expired" {
			t.Errorf("submit of a %s token: %d %s, want 410 confirm-token-expired", v, r.status, r.body)
		}
		if r := sh.submit(t, sh.apis[0], user, "forged-"+v, v+"."+parts[1]+"."+parts[2]); r.status != 401 {
			t.Errorf("a %s token under a v3 MAC: %d %s, want 401", v, r.status, r.body)
		}
	}
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 0 {
		t.Errorf("%d orders placed", n)
	}
}
