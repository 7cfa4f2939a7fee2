package web

import (
	"testing"
)

// Names need a visible character and hold no bidi control or zero-width
// character (joiners only inside an emoji or a word); every text refuses
// control characters and the bidi overrides.
func TestTextAndNameRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		text   string
		textOK bool // as free text (multiline)
		nameOK bool
	}{
		{"plain", "Beef Noodles", true, true},
		{"chinese", "牛肉面", true, true},
		{"arabic", "كباب", true, true},
		{"emoji with a joiner", "Chef 👨\u200d🍳 special", true, true},
		{"persian with a non-joiner", "می\u200cخواهم", true, true},
		{"emoji with a variation selector", "Hot ❤\ufe0f", true, true},
		{"only a zero-width space", "\u200b", true, false},
		{"a zero-width space inside", "Bee\u200bf", true, false},
		{"only spaces", "   ", true, false},
		{"only an ideographic space", "\u3000", true, false},
		{"only a hangul filler", "\u3164", true, false},
		{"only a braille blank", "\u2800", true, false},
		{"a joiner at the end", "Beef\u200d", true, false},
		{"a joiner beside a space", "Beef \u200dNoodles", true, false},
		{"right-to-left override", "abc\u202egpj.exe", false, false},
		{"left-to-right embedding", "\u202aabc", false, false},
		{"a bidi isolate", "Order \u2068كباب\u2069 now", true, false},
		{"a right-to-left mark", "كباب\u200f 2", true, false},
		{"a byte order mark", "\ufeffBeef", true, false},
		{"a word joiner", "Be\u2060ef", true, false},
		{"NUL", "Be\x00ef", false, false},
		{"a newline", "Beef\nNoodles", true, false},
		{"a combining mark alone", "\u0301", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckText("f", tc.text, true); (err == nil) != tc.textOK {
				t.Errorf("CheckText(%q) = %v, want ok %v", tc.text, err, tc.textOK)
			}
			if err := CheckName("f", tc.text); (err == nil) != tc.nameOK {
				t.Errorf("CheckName(%q) = %v, want ok %v", tc.text, err, tc.nameOK)
			}
		})
	}
}
