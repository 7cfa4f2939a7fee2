package web

import (
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/problem"
)

// The text rule, one for every string the API takes: valid UTF-8 (the
// JSON decoder already turns invalid bytes into U+FFFD) without NUL or any
// other control character, since PostgreSQL cannot store NUL and control
// characters in names and addresses only serve to spoof or break what
// staff and couriers read. Nor the bidi embeddings and overrides
// (U+202A to U+202E), which turn text around to spoof it and which no
// user needs (isolates and marks serve mixed scripts). Fields tagged
// `text:"multiline"` may also hold tabs and newlines.
//
// Names (fields tagged `text:"name"`) are what staff, couriers and
// customers identify things by, so they follow a stricter rule: at least
// one visible character, and no bidi control or zero-width character at
// all (a zero-width joiner or non-joiner only between two visible
// characters, where emoji and scripts such as Persian need them).

// CheckText applies the text rule to s, a field's value.
func CheckText(field, s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return problem.Field(field, "must be valid UTF-8")
	}
	for i, r := range s {
		switch {
		case r >= '\u202a' && r <= '\u202e':
			return problem.Field(field, "no bidi embedding or override characters (found %U at byte %d)", r, i)
		case !unicode.IsControl(r) || (multiline && (r == '\n' || r == '\t')):
			continue
		}
		allowed := "no control characters"
		if multiline {
			allowed = "no control characters other than tab and newline"
		}
		return problem.Field(field, "%s (found %U at byte %d)", allowed, r, i)
	}
	return nil
}

// CheckName applies the name rule to s, a name field's value (empty
// names are the caller's to allow or refuse).
func CheckName(field, s string) error {
	if err := CheckText(field, s, false); err != nil {
		return err
	}
	if s == "" {
		return nil
	}
	visible := false
	prev := ' '
	for i, r := range s {
		switch {
		case r == '\u200c' || r == '\u200d':
			next, n := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
			if !isVisible(prev) || n == 0 || !isVisible(next) {
				return problem.Field(field, "a zero-width joiner or non-joiner only between two visible characters (found %U at byte %d)", r, i)
			}
		case unicode.Is(unicode.Cf, r) || invisibleLetters[r]:
			return problem.Field(field, "no invisible, zero-width or bidi control characters in a name (found %U at byte %d)", r, i)
		case isVisible(r):
			visible = true
		}
		prev = r
	}
	if !visible {
		return problem.Field(field, "must have at least one visible character")
	}
	return nil
}

// isVisible reports whether r draws something of its own: a letter,
// digit, punctuation or symbol that is not one of the blank ones.
func isVisible(r rune) bool {
	return unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S) && !invisibleLetters[r]
}

// invisibleLetters are characters of visible categories that render as
// blank (Hangul fillers, the Braille blank, the Khmer inherent vowels).
var invisibleLetters = map[rune]bool{
	'\u115f': true, '\u1160': true, '\u3164': true, '\uffa0': true, '\u2800': true, '\u17b4': true, '\u17b5': true,
}

// checkStrings applies the text rule to every string reachable from v, a
// decoded request body, naming fields by their JSON path.
func checkStrings(v reflect.Value, path string, multiline bool) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkStrings(v.Elem(), path, multiline)
	case reflect.String:
		return CheckText(path, v.String(), multiline)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes, not text
		}
		for i := range v.Len() {
			if err := checkStrings(v.Index(i), path+"["+strconv.Itoa(i)+"]", multiline); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key()
			name := joinPath(path, k.String())
			if k.Kind() == reflect.String {
				if err := CheckText(name, k.String(), false); err != nil {
					return err
				}
			}
			if err := checkStrings(iter.Value(), name, multiline); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			field := joinPath(path, name)
			if f.Tag.Get("text") == "name" {
				if err := checkNames(v.Field(i), field); err != nil {
					return err
				}
				continue
			}
			if err := checkStrings(v.Field(i), field, f.Tag.Get("text") == "multiline"); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkNames applies the name rule to a name field: a string, or a
// pointer to one.
func checkNames(v reflect.Value, path string) error {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.String {
		return checkStrings(v, path, false)
	}
	return CheckName(path, v.String())
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
