package server

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
)

// nameRange is a range of entity names a key may see: the names that
// start with prefix, or, exact, the one name prefix.
type nameRange struct {
	prefix string
	exact  bool
}

// visibleRanges returns the ranges of names under within (a prefix, ""
// for every name) that the call's key holds a permission of wanted on (0:
// any permission), disjoint and in name order, so that a listing reads
// those ranges only: what a key may not see costs it nothing. It is a
// single range of within itself for a key that sees everything there
// (and without keys).
func (s *Server) visibleRanges(ctx context.Context, wanted Action, within string) []nameRange {
	return s.grantRanges(ctx, wanted, sluice.CanonicalName(within), sluice.CanonicalName, grantPrefixes)
}

// consumerRanges is visibleRanges for consumer names, which are ranges
// of names in lower case (grants compare names so; a stream listing
// compares consumers so): of consumer, when set, or else under the
// prefix within.
func (s *Server) consumerRanges(ctx context.Context, wanted Action, consumer, within string) []nameRange {
	if consumer != "" {
		if k, _ := ctx.Value(keyCtx{}).(*authKey); !s.keyAllows(k, wanted, consumer) {
			return nil
		}
		return []nameRange{{prefix: strings.ToLower(consumer), exact: true}}
	}
	lower := func(p string) []string { return []string{strings.ToLower(p)} }
	return s.grantRanges(ctx, wanted, strings.ToLower(within), strings.ToLower, lower)
}

// grantRanges returns the ranges of names under within that the call's
// key holds a permission of wanted on, as visibleRanges says; canon
// turns a grant's name, and prefixes a grant's prefix, into the form the
// names are listed in.
func (s *Server) grantRanges(ctx context.Context, wanted Action, within string,
	canon func(string) string, prefixes func(string) []string) []nameRange {
	if s.keys == nil {
		return []nameRange{{prefix: within}}
	}
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	if k == nil {
		return nil
	}
	var rs []nameRange
	for _, g := range k.Grants {
		if g.Actions == 0 || wanted != 0 && g.Actions&wanted != wanted {
			continue
		}
		for _, p := range g.Entities {
			prefix, wild := strings.CutSuffix(p, "*")
			if !wild {
				if prefix = canon(prefix); strings.HasPrefix(prefix, within) {
					rs = append(rs, nameRange{prefix: prefix, exact: true})
				}
				continue
			}
			for _, prefix := range prefixes(prefix) {
				switch {
				case strings.HasPrefix(within, prefix):
					return []nameRange{{prefix: within}} // covers all of within
				case strings.HasPrefix(prefix, within):
					rs = append(rs, nameRange{prefix: prefix})
				}
			}
		}
	}
	// In name order, a prefix before the names it covers; then drop what
	// a range before covers. Disjoint prefixes sort as their names do.
	slices.SortFunc(rs, func(a, b nameRange) int {
		if c := strings.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		if a.exact == b.exact {
			return 0
		}
		if a.exact {
			return 1
		}
		return -1
	})
	var out []nameRange
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1] == r || !out[n-1].exact && strings.HasPrefix(r.prefix, out[n-1].prefix)) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// grantPrefixes returns the prefixes, in the canonical form storage
// holds names in (sluice.CanonicalName), of the names a grant's prefix
// covers. A grant compares names in lower case, so a prefix that ends
// inside a "/Subscriptions/" segment, whatever its case ("t/Subscr",
// "t/s"), covers the names that start so in lower case ("t/subscribers",
// "t/stock") and every subscription of the topic before the segment:
// those whose canonical paths start with "t/Subscriptions/".
func grantPrefixes(prefix string) []string {
	c := sluice.CanonicalName(prefix)
	i := strings.LastIndexByte(c, '/')
	if i < 0 || strings.Contains(c, subscriptionsSegment) {
		return []string{c}
	}
	if cut := c[i:]; len(cut) > 1 && strings.HasPrefix(strings.ToLower(subscriptionsSegment), cut) {
		return []string{c, c[:i] + subscriptionsSegment}
	}
	return []string{c}
}

// subscriptionsSegment is the segment of a subscription's path, as
// canonical names spell it.
var subscriptionsSegment = sluice.SubscriptionPath("", "")

// listRanges lists up to n items after the name after, in name order,
// from the ranges (visibleRanges), reading each with list (the items
// whose names start with a prefix, after a name) or, for one name, get
// (false when there is none). It reads nothing outside the ranges.
func listRanges[E any](ctx context.Context, ranges []nameRange, after string, n int,
	list func(ctx context.Context, prefix, after string, max int) ([]E, error),
	get func(ctx context.Context, name string) (E, bool, error),
	name func(E) string) ([]E, error) {
	var out []E
	for _, r := range ranges {
		if len(out) == n {
			break
		}
		if r.exact {
			if r.prefix <= after || !validPrefix(r.prefix) {
				continue
			}
			e, ok, err := get(ctx, r.prefix)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, e)
			}
			continue
		}
		from := ""
		switch {
		case strings.HasPrefix(after, r.prefix):
			from = after
		case after > r.prefix:
			continue // the whole range sorts before after
		}
		if r.prefix != "" && !validPrefix(r.prefix) {
			continue // no entity's name starts so
		}
		for len(out) < n {
			want := min(n-len(out), maxList)
			page, err := list(ctx, r.prefix, from, want)
			if err != nil {
				return nil, err
			}
			out = append(out, page...)
			if len(page) < want {
				break // the range ends
			}
			from = name(page[len(page)-1])
		}
	}
	return out, nil
}

// validPrefix reports whether an entity's name may start with prefix:
// a letter or digit, then letters, digits and ".-_/".
func validPrefix(prefix string) bool {
	for i := range len(prefix) {
		c := prefix[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '-' && c != '_' && c != '/') {
			return false
		}
	}
	return true
}

// absent turns the not-found of one entity's lookup into (zero, false).
func absent[E any](e E, err error) (E, bool, error) {
	if errors.Is(err, sluice.ErrEntityNotFound) {
		var zero E
		return zero, false, nil
	}
	return e, err == nil, err
}
