package filter

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

var (
	// ErrSyntax is wrapped by every error Parse returns: the filter is not
	// acceptable. The error is a *SyntaxError that says where and why.
	ErrSyntax = errors.New("filter: syntax error")

	// ErrTooComplex is wrapped, together with ErrSyntax, by the errors of
	// filters that are longer than MaxLength bytes or nest deeper than
	// MaxDepth.
	ErrTooComplex = errors.New("filter: too complex")

	// ErrEvaluation is wrapped by every error Match returns: the message's
	// properties do not fit the filter, such as a property compared with
	// a number whose value is not a number.
	ErrEvaluation = errors.New("filter: evaluation failed")
)

// Limits on a filter.
const (
	// MaxLength is the most bytes a filter, and its canonical form, may
	// have (the limit of Service Bus).
	MaxLength = 1024
	// MaxDepth is how deep parentheses and NOT operators may nest.
	MaxDepth = 32
)

// SyntaxError is the error Parse returns for a filter it does not accept.
// It wraps ErrSyntax, and also ErrTooComplex when a limit was exceeded.
type SyntaxError struct {
	// Offset is the byte offset in the filter where the problem was
	// found.
	Offset int
	// Near is the text of the token at Offset (shortened when long), or
	// empty at the end of the filter.
	Near string
	// Msg says what is wrong or what was expected there.
	Msg string

	tooComplex bool
}

// Error describes the problem, where it is and what was expected.
func (e *SyntaxError) Error() string {
	if e.Near == "" {
		return fmt.Sprintf("filter: syntax error at offset %d (end of filter): %s", e.Offset, e.Msg)
	}
	return fmt.Sprintf("filter: syntax error at offset %d (near %q): %s", e.Offset, e.Near, e.Msg)
}

// Unwrap returns ErrSyntax, and ErrTooComplex when a limit was exceeded.
func (e *SyntaxError) Unwrap() []error {
	if e.tooComplex {
		return []error{ErrSyntax, ErrTooComplex}
	}
	return []error{ErrSyntax}
}

// maxQuoted is how many bytes of a token or value an error message shows.
const maxQuoted = 40

// shorten cuts s to at most maxQuoted bytes on a character boundary,
// marking the cut with "...".
func shorten(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
