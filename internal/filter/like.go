package filter

import (
	"strings"
	"unicode/utf8"
)

// likePattern is a compiled LIKE pattern: the pattern split at each run of
// % into segments of literal text and _ wildcards.
//
// Matching is greedy and never backtracks further than one segment: the
// first segment must match at the start, the last at the end, and each
// segment in between at its leftmost place after the one before. Because a
// segment matches a fixed number of characters, the leftmost place is
// always the best one, so the whole match takes at most
// O(len(value) × len(pattern)) steps.
type likePattern struct {
	segments   []likeSegment // at least one; the first and last may be empty
	hasPercent bool          // whether the pattern has a %; if not, it is one segment
}

// likeSegment is a run of the pattern without %.
type likeSegment struct {
	parts []likePart
	runes int // how many characters the segment matches
}

// likePart is literal text, or (when literal is empty) a run of any
// characters.
type likePart struct {
	literal string
	any     int
}

// likeError is a problem in a pattern, at byte offset pos within it.
type likeError struct {
	pos int
	msg string
}

// compileLike compiles pattern, in which escape (when hasEscape) makes the
// following %, _ or escape character literal.
func compileLike(pattern string, escape rune, hasEscape bool) (likePattern, *likeError) {
	var p likePattern
	var seg likeSegment
	var lit strings.Builder
	flushLiteral := func() {
		if lit.Len() > 0 {
			seg.parts = append(seg.parts, likePart{literal: lit.String()})
			lit.Reset()
		}
	}
	endSegment := func() {
		flushLiteral()
		// Empty segments between two % are dropped: %% is %.
		if len(p.segments) == 0 || len(seg.parts) > 0 {
			p.segments = append(p.segments, seg)
		}
		seg = likeSegment{}
	}
	for i := 0; i < len(pattern); {
		r, size := utf8.DecodeRuneInString(pattern[i:])
		if hasEscape && r == escape {
			if i+size == len(pattern) {
				return likePattern{}, &likeError{i, "the pattern ends with the escape character; it must be followed by %, _ or itself"}
			}
			next, nextSize := utf8.DecodeRuneInString(pattern[i+size:])
			if next != '%' && next != '_' && next != escape {
				return likePattern{}, &likeError{i, "the escape character must be followed by %, _ or itself"}
			}
			lit.WriteRune(next)
			seg.runes++
			i += size + nextSize
			continue
		}
		switch r {
		case '%':
			p.hasPercent = true
			endSegment()
		case '_':
			flushLiteral()
			if n := len(seg.parts); n > 0 && seg.parts[n-1].literal == "" {
				seg.parts[n-1].any++
			} else {
				seg.parts = append(seg.parts, likePart{any: 1})
			}
			seg.runes++
		default:
			lit.WriteString(pattern[i : i+size])
			seg.runes++
		}
		i += size
	}
	flushLiteral()
	// The last segment is kept even when empty (the pattern ends in %).
	p.segments = append(p.segments, seg)
	return p, nil
}

// match reports whether s matches the pattern.
func (p *likePattern) match(s string) bool {
	first := &p.segments[0]
	i, ok := first.matchAt(s, 0)
	if !ok {
		return false
	}
	if !p.hasPercent {
		return i == len(s)
	}
	// The last segment must end at the end of s, so it starts exactly
	// last.runes characters before the end.
	last := &p.segments[len(p.segments)-1]
	n := utf8.RuneCountInString(s[i:])
	if n < last.runes {
		return false
	}
	j := i + skipRunes(s[i:], n-last.runes)
	if end, ok := last.matchAt(s, j); !ok || end != len(s) {
		return false
	}
	s = s[:j]
	for k := 1; k < len(p.segments)-1; k++ {
		if i, ok = p.segments[k].find(s, i); !ok {
			return false
		}
	}
	return true
}

// skipRunes returns the byte offset in s after its first n characters.
func skipRunes(s string, n int) int {
	i := 0
	for ; n > 0; n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// matchAt reports whether the segment matches s at byte offset pos, and
// where the match ends.
func (seg *likeSegment) matchAt(s string, pos int) (int, bool) {
	for _, part := range seg.parts {
		if part.literal != "" {
			if !strings.HasPrefix(s[pos:], part.literal) {
				return 0, false
			}
			pos += len(part.literal)
			continue
		}
		for range part.any {
			if pos == len(s) {
				return 0, false
			}
			_, size := utf8.DecodeRuneInString(s[pos:])
			pos += size
		}
	}
	return pos, true
}

// find returns where the leftmost match of the segment in s at or after
// byte offset from ends.
func (seg *likeSegment) find(s string, from int) (int, bool) {
	lead := seg.parts[0].literal
	for pos := from; ; {
		if lead != "" {
			// A literal starts with a character's first byte, so
			// where it is found is a character boundary of s.
			k := strings.Index(s[pos:], lead)
			if k < 0 {
				return 0, false
			}
			pos += k
		}
		if end, ok := seg.matchAt(s, pos); ok {
			return end, true
		}
		if pos == len(s) {
			return 0, false
		}
		_, size := utf8.DecodeRuneInString(s[pos:])
		pos += size
	}
}
