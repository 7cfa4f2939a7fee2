package printing

import (
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// A pickup order for a slot prints its number and its slot in the
// merchant's time, who collects it instead of an address, and no
// delivery fee; a delivery order prints neither, and its address.
func TestTicketOfPickupAndScheduledOrders(t *testing.T) {
	t.Parallel()
	no := int32(7)
	start := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC) // 12:00 in Shanghai
	end := start.Add(30 * time.Minute)
	order := dbsqlc.PrintTicketOrderRow{ID: 42, CreatedAt: start.Add(-20 * time.Hour), ItemsTotalFen: 2500, TotalFen: 2500,
		Address: []byte(`{"name":"Li Lei","phone":"13800138000","detail":""}`), Fulfilment: "pickup", PickupNo: &no,
		SlotStart: &start, SlotEnd: &end, MerchantName: "Noodle Bar", TimeZone: "Asia/Shanghai"}
	lines := []dbsqlc.PrintTicketLinesRow{{Name: "牛肉面", Qty: 1, LineTotalFen: 2500, Options: []byte(`[]`)}}
	receipt := ticket{job: dbsqlc.PrintJob{OrderID: 42, PrinterID: 1, Seq: 1, Attempt: 1}, printer: dbsqlc.Printer{Role: "receipt"}, order: order, lines: lines}
	got := receipt.render()
	for _, want := range []string{"取餐号 7  到店自取\n", "预约 2026-12-07 12:00-12:30\n", "取餐人: Li Lei 13800138000\n", "实付 ¥25.00\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the receipt lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, ticketDelivery) || strings.Contains(got, ticketAddress) {
		t.Errorf("a pickup receipt prints a delivery fee or an address:\n%s", got)
	}

	order.Fulfilment, order.PickupNo, order.SlotStart, order.SlotEnd = "delivery", nil, nil, nil
	order.Address = []byte(`{"name":"Li Lei","phone":"13800138000","detail":"88 Keyuan Rd"}`)
	delivery := ticket{job: receipt.job, printer: receipt.printer, order: order, lines: lines}
	got = delivery.render()
	if strings.Contains(got, TicketLinePickup) || strings.Contains(got, TicketLineSlot) || !strings.Contains(got, "地址: Li Lei 13800138000 88 Keyuan Rd\n") {
		t.Errorf("the delivery receipt:\n%s", got)
	}
}
