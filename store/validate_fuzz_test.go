package store_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// FuzzValidateName checks the name rules on arbitrary text against their
// statement: an entity name is 1 to MaxNameLen ASCII letters, digits,
// '.', '-', '_' and '/', starting and ending with a letter or digit; a
// tenant's names the same without '/' and at most MaxTenantNameLen; a
// stream key 1 to MaxKeyLen bytes of UTF-8. A refused name wraps
// ErrInvalidName, and a name's case never decides whether it is valid
// (names are case-insensitive).
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{
		"", "a", "orders", "orders/eu", "a.b-c_d", "-a", "a-", "/a", "a/", "a b", "é", "ABC", "Orders.EU",
		"topic/Subscriptions/sub", "a\x00b", strings.Repeat("a", store.MaxNameLen), strings.Repeat("a", store.MaxNameLen+1),
		strings.Repeat("b", store.MaxTenantNameLen+1), "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		checkRule(t, "entity", name, store.ValidateName("queue", name), validName(name, store.MaxNameLen, true))
		checkRule(t, "tenant", name, store.ValidateTenant(store.Tenant{Service: name, Provider: "p"}),
			validName(name, store.MaxTenantNameLen, false))
		checkRule(t, "tenant", name, store.ValidateTenant(store.Tenant{Service: "s", Provider: name}),
			validName(name, store.MaxTenantNameLen, false))
		checkRule(t, "stream key", name, store.ValidateKey(name), name != "" && len(name) <= store.MaxKeyLen && utf8.ValidString(name))
		// Names are ASCII: their case is ASCII's (Unicode's would map
		// "ſ" to "S" and the Kelvin sign to "k").
		for _, other := range []string{asciiCase(name, 'a', 'z', 'A'-'a'), asciiCase(name, 'A', 'Z', 'a'-'A')} {
			if (store.ValidateName("queue", name) == nil) != (store.ValidateName("queue", other) == nil) {
				t.Fatalf("name %q and %q differ only in case, but one is valid and the other not", name, other)
			}
		}
	})
}

// asciiCase shifts the ASCII letters from..to of s by delta.
func asciiCase(s string, from, to rune, delta rune) string {
	return strings.Map(func(r rune) rune {
		if from <= r && r <= to {
			return r + delta
		}
		return r
	}, s)
}

func checkRule(t *testing.T, what, name string, err error, valid bool) {
	t.Helper()
	switch {
	case valid && err != nil:
		t.Fatalf("%s name %q refused: %v", what, name, err)
	case !valid && err == nil:
		t.Fatalf("%s name %q accepted", what, name)
	case err != nil && !errors.Is(err, sluicetype.ErrInvalidName):
		t.Fatalf("%s name %q: error %v does not wrap ErrInvalidName", what, name, err)
	}
}

// validName is the rule as the documentation states it.
func validName(name string, max int, slash bool) bool {
	if name == "" || len(name) > max {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i == 0 || i == len(name)-1:
			return false
		case c == '.' || c == '-' || c == '_' || slash && c == '/':
		default:
			return false
		}
	}
	return true
}
