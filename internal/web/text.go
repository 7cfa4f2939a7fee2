package web

import (
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/takeout/takeout/internal/problem"
)

// The text rule, one for every string the API takes: valid UTF-8 (the
// JSON decoder already turns invalid bytes into U+FFFD) without NUL or any
// other control character, since PostgreSQL cannot store NUL and control
// characters in names and addresses only serve to spoof or break what
// staff and couriers read. Fields tagged `text:"multiline"` may also hold
// tabs and newlines.

// CheckText applies the text rule to s, a field's value.
func CheckText(field, s string, multiline bool) error {
	for i, r := range s {
		if !unicode.IsControl(r) || (multiline && (r == '\n' || r == '\t')) {
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
			if err := checkStrings(v.Field(i), joinPath(path, name), f.Tag.Get("text") == "multiline"); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
