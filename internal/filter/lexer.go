package filter

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokenKind classifies a token.
type tokenKind uint8

const (
	tokEOF     tokenKind = iota
	tokWord              // identifier or keyword; text is as written
	tokBracket           // [bracketed name]; text is the unescaped name
	tokString            // 'string'; text is the unescaped value
	tokNumber            // number; text is the lexeme
	tokCompare           // comparison operator; text is the operator
	tokLParen
	tokRParen
	tokComma
	tokDot
)

// token is one lexical token of a filter.
type token struct {
	kind tokenKind
	text string
	pos  int // byte offset of the token's first byte
	end  int // byte offset just past the token
}

// isKeyword reports whether word is a reserved word, in any case; a
// reserved word names a property only in brackets.
func isKeyword(word string) bool {
	for _, k := range [...]string{"AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE"} {
		if strings.EqualFold(word, k) {
			return true
		}
	}
	return false
}

// is reports whether t is the keyword kw (given in upper case).
func (t token) is(kw string) bool {
	return t.kind == tokWord && strings.EqualFold(t.text, kw)
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool  { return isIdentStart(r) || unicode.IsDigit(r) }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }

// isIdentifier reports whether name lexes as one word token.
func isIdentifier(name string) bool {
	for i, r := range name {
		if i == 0 && !isIdentStart(r) || !isIdentPart(r) {
			return false
		}
	}
	return name != ""
}

// lexer splits a filter into tokens.
type lexer struct {
	src string
	pos int
}

// tokenize returns the tokens of src, ending with a tokEOF token.
func tokenize(src string) ([]token, error) {
	lx := lexer{src: src}
	var toks []token
	for {
		t, err := lx.next()
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		if t.kind == tokEOF {
			return toks, nil
		}
	}
}

// errorAt returns a syntax error at offset pos, near the text from pos to
// end.
func (lx *lexer) errorAt(pos, end int, msg string) error {
	return &SyntaxError{Offset: pos, Near: shorten(lx.src[pos:end]), Msg: msg}
}

// next scans the token at lx.pos.
func (lx *lexer) next() (token, error) {
	src := lx.src
	for lx.pos < len(src) && strings.IndexByte(" \t\n\r\f\v", src[lx.pos]) >= 0 {
		lx.pos++
	}
	start := lx.pos
	if start == len(src) {
		return token{kind: tokEOF, pos: start, end: start}, nil
	}
	single := func(kind tokenKind) (token, error) {
		lx.pos++
		return token{kind: kind, text: src[start:lx.pos], pos: start, end: lx.pos}, nil
	}
	switch c := src[start]; {
	case c == '(':
		return single(tokLParen)
	case c == ')':
		return single(tokRParen)
	case c == ',':
		return single(tokComma)
	case c == '.':
		return single(tokDot)
	case c == '=':
		return single(tokCompare)
	case c == '<' || c == '>' || c == '!':
		return lx.compareOp()
	case c == '\'':
		return lx.quoted('\'', tokString)
	case c == '[':
		return lx.quoted(']', tokBracket)
	case isDigit(c) || c == '-' && start+1 < len(src) && isDigit(src[start+1]):
		return lx.number()
	case c == '"':
		return token{}, lx.errorAt(start, start+1, `unexpected '"': strings are written in single quotes, names with spaces or symbols in brackets`)
	case strings.IndexByte("+-*/%", c) >= 0:
		return token{}, lx.errorAt(start, start+1, "unexpected '"+string(c)+"': arithmetic is not supported (a negative number is written -5)")
	}
	r, size := utf8.DecodeRuneInString(src[start:])
	if !isIdentStart(r) {
		return token{}, lx.errorAt(start, start+size, "unexpected character; expected a property, a literal, an operator or a parenthesis")
	}
	lx.pos += size
	for lx.pos < len(src) {
		r, size := utf8.DecodeRuneInString(src[lx.pos:])
		if !isIdentPart(r) {
			break
		}
		lx.pos += size
	}
	return token{kind: tokWord, text: src[start:lx.pos], pos: start, end: lx.pos}, nil
}

// compareOp scans <, <=, <>, >, >= or != at lx.pos.
func (lx *lexer) compareOp() (token, error) {
	src, start := lx.src, lx.pos
	two := ""
	if start+2 <= len(src) {
		two = src[start : start+2]
	}
	switch {
	case two == "<=" || two == "<>" || two == ">=" || two == "!=":
		lx.pos += 2
	case src[start] == '!':
		return token{}, lx.errorAt(start, start+1, "unexpected '!': not equal is written <> or !=, negation NOT")
	default:
		lx.pos++
	}
	return token{kind: tokCompare, text: src[start:lx.pos], pos: start, end: lx.pos}, nil
}

// quoted scans a string literal or bracketed name at lx.pos, whose closing
// character is written twice to stand for itself.
func (lx *lexer) quoted(closing byte, kind tokenKind) (token, error) {
	src, start := lx.src, lx.pos
	var b strings.Builder
	i := start + 1
	for {
		j := strings.IndexByte(src[i:], closing)
		if j < 0 {
			if kind == tokString {
				return token{}, lx.errorAt(start, len(src), "unterminated string: a closing ' is missing (write '' for a quote inside a string)")
			}
			return token{}, lx.errorAt(start, len(src), "unterminated name: a closing ] is missing (write ]] for a ] inside a name)")
		}
		b.WriteString(src[i : i+j])
		i += j + 1
		if i < len(src) && src[i] == closing {
			b.WriteByte(closing)
			i++
			continue
		}
		break
	}
	lx.pos = i
	if kind == tokBracket && b.Len() == 0 {
		return token{}, lx.errorAt(start, i, "empty property name in brackets")
	}
	return token{kind: kind, text: b.String(), pos: start, end: i}, nil
}

// number scans a number at lx.pos: an optional minus sign, digits, an
// optional fraction and an optional exponent.
func (lx *lexer) number() (token, error) {
	src, start := lx.src, lx.pos
	i := start
	if src[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(src) && isDigit(src[i]) {
			i++
			n++
		}
		return n
	}
	digits()
	if i < len(src) && src[i] == '.' {
		i++
		if digits() == 0 {
			return token{}, lx.errorAt(start, i, "malformed number: expected digits after the decimal point")
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if digits() == 0 {
			return token{}, lx.errorAt(start, i, "malformed number: expected digits in the exponent")
		}
	}
	if i < len(src) {
		if r, size := utf8.DecodeRuneInString(src[i:]); isIdentPart(r) || r == '.' {
			return token{}, lx.errorAt(start, i+size, "malformed number: a number cannot run into letters or another '.'")
		}
	}
	lx.pos = i
	return token{kind: tokNumber, text: src[start:i], pos: start, end: i}, nil
}
