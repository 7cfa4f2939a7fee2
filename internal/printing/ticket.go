package printing

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// TicketID is a ticket's deterministic id: its order, printer, sequence
// (1 the accept's ticket, 2... an operator's reprints) and attempt, each
// in base 36 at a fixed width (13, 8, 2 and 2 characters: 25 letters and
// digits, within the 32 of Yilianyun's origin_id, and no separator that
// a base-36 digit could be mistaken for). The same attempt of the same
// ticket always has the same id, so a provider with an idempotency id
// prints it once.
func TicketID(orderID, printerID int64, seq, attempt int32) string {
	return base36(orderID, 13) + base36(printerID, 8) + base36(int64(seq), 2) + base36(int64(attempt), 2)
}

func base36(v int64, width int) string {
	s := strconv.FormatInt(max(v, 0), 36)
	if len(s) > width {
		s = s[len(s)-width:] // only ids beyond any real one: 8 base-36 digits are 2.8e12 printers
	}
	return strings.Repeat("0", width-len(s)) + s
}

// TicketRef is what a ticket id names.
type TicketRef struct {
	OrderID, PrinterID int64
	Seq, Attempt       int32
}

// ParseTicketID reads a TicketID.
func ParseTicketID(id string) (TicketRef, bool) {
	if len(id) != 25 {
		return TicketRef{}, false
	}
	if strings.ToLower(id) != id {
		return TicketRef{}, false
	}
	var r TicketRef
	var err error
	field := func(at, w int) string { return id[at : at+w] }
	if r.OrderID, err = strconv.ParseInt(field(0, 13), 36, 64); err != nil {
		return TicketRef{}, false
	}
	if r.PrinterID, err = strconv.ParseInt(field(13, 8), 36, 64); err != nil {
		return TicketRef{}, false
	}
	seq, err := strconv.ParseInt(field(21, 2), 36, 32)
	if err != nil {
		return TicketRef{}, false
	}
	attempt, err := strconv.ParseInt(field(23, 2), 36, 32)
	if err != nil {
		return TicketRef{}, false
	}
	r.Seq, r.Attempt = int32(seq), int32(attempt)
	return r, true
}

// The words a ticket prints. A kitchen reads Simplified Chinese.
const (
	TicketLineKitchen  = "厨房单"
	TicketLineReceipt  = "顾客联"
	TicketMarkAttempt  = "重打 #" // may duplicate a ticket whose outcome was unknown
	TicketMarkReprint  = "补打 #" // an operator's reprint
	TicketLineID       = "票据 "
	ticketLineOrder    = "订单 "
	ticketLinePlaced   = "下单 "
	ticketRule         = "--------------------------------"
	ticketItems        = "商品 "
	ticketPackaging    = "包装 "
	ticketDelivery     = "配送 "
	ticketDiscount     = "优惠 -"
	ticketTotal        = "实付 "
	ticketRemark       = "备注: "
	ticketAddress      = "地址: "
	ticketNoKitchenDue = "(本单无此档口菜品)"
	// TicketLinePickup heads a pickup order's number; a pickup order
	// says so, and names who collects it instead of an address.
	TicketLinePickup = "取餐号 "
	ticketPickup     = "到店自取"
	ticketCollector  = "取餐人: "
	// TicketLineSlot is a scheduled order's slot.
	TicketLineSlot = "预约 "
)

// Yuan formats fen as a kitchen reads an amount: ¥25.00.
func Yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s¥%d.%02d", sign, fen/100, fen%100)
}

// ticket is what one paper says.
type ticket struct {
	job     dbsqlc.PrintJob
	printer dbsqlc.Printer
	order   dbsqlc.PrintTicketOrderRow
	lines   []dbsqlc.PrintTicketLinesRow
}

// render writes the ticket's text: a kitchen printer's ticket lists the
// dishes of its categories and what goes with them, the receipt the
// whole order with its amounts; both carry the marks of a reprint and
// the ticket's id.
func (t ticket) render() string {
	var b strings.Builder
	line := func(s ...string) { b.WriteString(strings.Join(s, "")); b.WriteByte('\n') }
	line(t.order.MerchantName)
	kitchen := t.printer.Role == "kitchen"
	if kitchen {
		line(TicketLineKitchen, " · ", t.printer.Name)
	} else {
		line(TicketLineReceipt)
	}
	if t.job.Seq > 1 {
		line(TicketMarkReprint, strconv.Itoa(int(t.job.Seq)))
	}
	if t.job.Attempt > 1 {
		line(TicketMarkAttempt, strconv.Itoa(int(t.job.Attempt)))
	}
	loc, err := time.LoadLocation(t.order.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	pickup := t.order.Fulfilment == "pickup"
	if pickup && t.order.PickupNo != nil {
		line(TicketLinePickup, strconv.Itoa(int(*t.order.PickupNo)), "  ", ticketPickup)
	}
	if t.order.SlotStart != nil && t.order.SlotEnd != nil {
		line(TicketLineSlot, t.order.SlotStart.In(loc).Format("2006-01-02 15:04"), "-", t.order.SlotEnd.In(loc).Format("15:04"))
	}
	line(ticketLineOrder, strconv.FormatInt(t.order.ID, 10))
	line(ticketLinePlaced, t.order.CreatedAt.In(loc).Format("2006-01-02 15:04"))
	line(ticketRule)
	printed := 0
	for _, l := range t.lines {
		if kitchen && len(t.printer.CategoryIds) > 0 && (l.CategoryID == nil || !slices.Contains(t.printer.CategoryIds, *l.CategoryID)) {
			continue
		}
		printed++
		if kitchen {
			line(l.Name, " ×", strconv.Itoa(int(l.Qty)))
		} else {
			line(l.Name, " ×", strconv.Itoa(int(l.Qty)), "  ", Yuan(l.LineTotalFen))
		}
		var opts []struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(l.Options, &opts) // a line without readable options prints without them
		for _, o := range opts {
			line("  ", o.Name)
		}
	}
	if printed == 0 {
		line(ticketNoKitchenDue)
	}
	line(ticketRule)
	if !kitchen {
		line(ticketItems, Yuan(t.order.ItemsTotalFen))
		if t.order.PackagingFeeFen > 0 {
			line(ticketPackaging, Yuan(t.order.PackagingFeeFen))
		}
		if !pickup {
			line(ticketDelivery, Yuan(t.order.DeliveryFeeFen))
		}
		if t.order.DiscountFen > 0 {
			line(ticketDiscount, Yuan(t.order.DiscountFen))
		}
		line(ticketTotal, Yuan(t.order.TotalFen))
		var addr struct {
			Name   string `json:"name"`
			Phone  string `json:"phone"`
			Detail string `json:"detail"`
		}
		switch ok := json.Unmarshal(t.order.Address, &addr) == nil; {
		case ok && pickup:
			line(ticketCollector, addr.Name, " ", addr.Phone)
		case ok && addr.Detail != "":
			line(ticketAddress, addr.Name, " ", addr.Phone, " ", addr.Detail)
		}
	}
	if t.order.Remark != "" {
		line(ticketRemark, t.order.Remark)
	}
	line(TicketLineID, TicketID(t.job.OrderID, t.job.PrinterID, t.job.Seq, t.job.Attempt))
	return b.String()
}
