package board

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/takeout/takeout/internal/statemachine"
)

// Every word the board shows is in strings.json, in each language: the
// languages have the same keys, none empty, with the same {names}; every
// key the script names is there, and so is every status an order can
// have.
func TestStringsAreComplete(t *testing.T) {
	t.Parallel()
	b, err := fs.ReadFile(static, "static/strings.json")
	if err != nil {
		t.Fatal(err)
	}
	var langs map[string]map[string]string
	if err := json.Unmarshal(b, &langs); err != nil {
		t.Fatal(err)
	}
	zh, en := langs["zh-CN"], langs["en"]
	if len(langs) != 2 || zh == nil || en == nil {
		t.Fatalf("languages %v, want zh-CN and en", slices.Collect(func(yield func(string) bool) {
			for l := range langs {
				yield(l)
			}
		}))
	}
	names := regexp.MustCompile(`\{\w+\}`)
	for key, text := range zh {
		other, ok := en[key]
		switch {
		case !ok:
			t.Errorf("%s is in zh-CN only", key)
		case text == "" || other == "":
			t.Errorf("%s is empty", key)
		case !slices.Equal(sorted(names.FindAllString(text, -1)), sorted(names.FindAllString(other, -1))):
			t.Errorf("%s: zh-CN fills %v, en %v", key, names.FindAllString(text, -1), names.FindAllString(other, -1))
		}
	}
	for key := range en {
		if _, ok := zh[key]; !ok {
			t.Errorf("%s is in en only", key)
		}
	}
	script, err := fs.ReadFile(static, "static/board.js")
	if err != nil {
		t.Fatal(err)
	}
	page, err := fs.ReadFile(static, "static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	salesScript, err := fs.ReadFile(static, "static/sales.js")
	if err != nil {
		t.Fatal(err)
	}
	salesPage, err := fs.ReadFile(static, "static/sales.html")
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, js := range [][]byte{script, salesScript} {
		for _, m := range regexp.MustCompile(`\bt\('([\w.-]+)'`).FindAllStringSubmatch(string(js), -1) {
			used = append(used, m[1])
		}
	}
	for _, html := range [][]byte{page, salesPage} {
		for _, m := range regexp.MustCompile(`data-text="([\w.-]+)"`).FindAllStringSubmatch(string(html), -1) {
			used = append(used, m[1])
		}
	}
	// The sales page's totals name their figures.
	used = append(used, "sales.orders", "sales.gross", "sales.net")
	for _, s := range statemachine.Statuses() {
		if s != statemachine.PendingPayment { // never on the board
			used = append(used, "status."+string(s))
		}
	}
	for _, a := range []string{"accept", "reject", "ready", "dispatch", "pick-up", "complete"} {
		used = append(used, "action."+a)
	}
	for _, c := range regexp.MustCompile(`\{ key: '(\w+)'`).FindAllStringSubmatch(string(script), -1) {
		used = append(used, "col."+c[1])
	}
	if len(used) < 40 {
		t.Fatalf("found only %d keys in use: the patterns no longer match the script", len(used))
	}
	for _, key := range used {
		if _, ok := zh[key]; !ok {
			t.Errorf("the board uses %s, which strings.json lacks", key)
		}
	}
	// No English left in the markup: every text there comes from the
	// strings.
	for name, html := range map[string][]byte{"index.html": page, "sales.html": salesPage} {
		for _, m := range regexp.MustCompile(`>([^<>]*[A-Za-z][^<>]*)<`).FindAllStringSubmatch(string(html), -1) {
			if strings.TrimSpace(m[1]) != "" {
				t.Errorf("%s has text of its own: %q", name, m[1])
			}
		}
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
