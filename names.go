package sluice

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Name and identifier limits, as Service Bus has them. Queue and topic
// names (paths) are at most 260 characters (store.MaxNameLen).
const (
	// MaxSubscriptionNameLength bounds a subscription's name.
	MaxSubscriptionNameLength = 50
	// MaxRuleNameLength bounds a rule's name.
	MaxRuleNameLength = 50
	// MaxIDLength bounds a message's MessageID, SessionID, PartitionKey
	// and ReplyToSessionID.
	MaxIDLength = 128
)

// validateIDs checks a message's identifiers as Service Bus does: each
// at most MaxIDLength characters of UTF-8, and a SessionID and a
// PartitionKey both set must be equal.
func validateIDs(m *Message) error {
	for _, id := range [...]struct{ what, v string }{
		{"MessageID", m.MessageID}, {"SessionID", m.SessionID},
		{"PartitionKey", m.PartitionKey}, {"ReplyToSessionID", m.ReplyToSessionID},
	} {
		if !utf8.ValidString(id.v) {
			return fmt.Errorf("%s is not valid UTF-8: %w", id.what, ErrInvalidArgument)
		}
		if n := utf8.RuneCountInString(id.v); n > MaxIDLength {
			return fmt.Errorf("%s is %d characters long, at most %d allowed: %w", id.what, n, MaxIDLength, ErrInvalidArgument)
		}
	}
	if m.SessionID != "" && m.PartitionKey != "" && m.SessionID != m.PartitionKey {
		return fmt.Errorf("SessionID %q and PartitionKey %q differ; when both are set they must be equal: %w",
			m.SessionID, m.PartitionKey, ErrInvalidArgument)
	}
	return nil
}

// validateShortName checks a subscription or rule name: a valid name of
// at most max characters.
func validateShortName(kind, name string, max int) error {
	if len(name) > max {
		return fmt.Errorf("%s name is %d characters long, at most %d allowed: %w", kind, len(name), max, ErrInvalidName)
	}
	return nil
}

// Entity names are case-insensitive, as in Service Bus: "Orders" and
// "orders" are one entity. Every name a caller gives goes through
// canonical before it reaches storage, which thus holds, and shows, each
// name in one form: lower case, with the "/Subscriptions/" segment of a
// subscription's path as SubscriptionPath spells it. (Names are ASCII:
// store.ValidateName refuses anything else.)
func canonical(name string) string {
	return CanonicalName(name)
}

// asciiLower lowers ASCII letters alone. (strings.ToLower would also map
// some non-ASCII runes to ASCII ones, the Kelvin sign to "k": a name no
// validation accepts would become one it does.)
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// CanonicalName returns the one form in which sluice stores and shows an
// entity's name: lower case, with a subscription path's
// "/Subscriptions/" segment spelled so. Two names are one entity exactly
// when their canonical forms are equal; a server matching names (grants,
// labels) compares canonical forms.
func CanonicalName(name string) string {
	lower := asciiLower(name)
	if i := strings.Index(lower, subscriptionsSegment); i >= 0 {
		return lower[:i] + "/Subscriptions/" + lower[i+len(subscriptionsSegment):]
	}
	return lower
}
