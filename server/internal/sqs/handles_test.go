package sqs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestHandles(t *testing.T) {
	token := strings.Repeat("0f", 16)
	zero := strings.Repeat("0", 32)
	for _, h := range []handle{
		{Token: token},
		{Token: token, Source: "orders-1"},
		{Token: token, Group: `g!"#$%&'()*+,-./:;<=>?@[\]^_{|}~`, SessionToken: "0123456789abcdef", Seqs: []int64{1, 9}},
	} {
		got, err := parseHandle(h.String())
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Errorf("parseHandle(%q) = %+v, %v; want %+v", h.String(), got, err, h)
		}
	}
	for _, bad := range []string{
		"x", token[:31], token + "0", zero, "f" + zero[1:], strings.ToUpper(token[:30]) + "zz", "d.!!!", "q." + token,
		handle{Token: token, Source: "a", Group: "g"}.String()[:2] + encodeHandle(handle{Token: token, Source: "a", Group: "g"}),
		"f." + encodeHandle(handle{Token: token, Group: "g", SessionToken: "short", Seqs: []int64{1}}),
		"f." + encodeHandle(handle{Token: token, Group: "g", SessionToken: "0123456789abcdef"}),
		"f." + encodeHandle(handle{Token: token, Group: "g", SessionToken: "0123456789abcdef", Seqs: []int64{0}}),
		"f." + encodeHandle(handle{Token: token, Group: "g", SessionToken: "0123456789abcdef", Seqs: make([]int64, 11)}),
		"d." + encodeHandle(handle{Token: "nothex", Source: "a"}),
		"d." + strings.Repeat("A", maxHandleLength),
	} {
		var e *Error
		if _, err := parseHandle(bad); !errors.As(err, &e) || e.Code != "ReceiptHandleIsInvalid" {
			t.Errorf("parseHandle(%q) = %v, want ReceiptHandleIsInvalid", bad, err)
		}
	}
	var e *Error
	if _, err := parseHandle(""); !errors.As(err, &e) || e.Code != "MissingParameter" {
		t.Errorf("parseHandle(\"\") = %v, want MissingParameter", err)
	}
}

// FuzzParseHandle checks that any handle parses or is refused, never
// panics, and that what parses reads back the same.
func FuzzParseHandle(f *testing.F) {
	f.Add(strings.Repeat("ab", 16))
	f.Add("d." + encodeHandle(handle{Token: strings.Repeat("ab", 16), Source: "q"}))
	f.Add("f." + encodeHandle(handle{Token: strings.Repeat("ab", 16), Group: "g", SessionToken: "0123456789abcdef", Seqs: []int64{1, 2}}))
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseHandle(s)
		if err != nil {
			return
		}
		again, err := parseHandle(h.String())
		if err != nil || !reflect.DeepEqual(again, h) {
			t.Fatalf("parseHandle(%q) = %+v, but its String %q reads as %+v, %v", s, h, h.String(), again, err)
		}
	})
}
