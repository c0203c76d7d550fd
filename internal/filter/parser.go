package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Parse parses a SQL filter. The error, if any, wraps ErrSyntax and is a
// *SyntaxError that says where the problem is and what was expected.
func Parse(src string) (*Expr, error) {
	if len(src) > MaxLength {
		at := MaxLength
		for at > 0 && !utf8.RuneStart(src[at]) {
			at--
		}
		return nil, &SyntaxError{
			Offset: at, Near: shorten(src[at:]), tooComplex: true,
			Msg: fmt.Sprintf("the filter is %d bytes, over the limit of %d", len(src), MaxLength),
		}
	}
	if !utf8.ValidString(src) {
		at := 0
		for {
			r, size := utf8.DecodeRuneInString(src[at:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			at += size
		}
		return nil, &SyntaxError{Offset: at, Near: src[at : at+1], Msg: "the filter is not valid UTF-8"}
	}
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := parser{src: src, toks: toks}
	if p.peek().kind == tokEOF {
		return nil, p.errorf("the filter is empty; write a condition such as color = 'red' (or TRUE to match everything)")
	}
	root, err := p.condition()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		if t.kind == tokRParen {
			return nil, p.errorf("unbalanced ')': there is no '(' before it to close")
		}
		return nil, p.errorf("expected AND, OR or the end of the filter")
	}
	var b strings.Builder
	root.write(&b)
	if b.Len() > MaxLength {
		return nil, &SyntaxError{
			Offset: 0, Near: shorten(src), tooComplex: true,
			Msg: fmt.Sprintf("the canonical form of the filter is %d bytes, over the limit of %d", b.Len(), MaxLength),
		}
	}
	return &Expr{root: root, canonical: b.String()}, nil
}

// parser is a recursive-descent parser over the tokens of a filter.
type parser struct {
	src   string
	toks  []token
	pos   int // index of the next token
	depth int // how many parentheses and NOTs enclose the next token
}

// peek returns the next token without consuming it.
func (p *parser) peek() token { return p.toks[p.pos] }

// peekAt returns the token n places after the next one, or the final
// tokEOF.
func (p *parser) peekAt(n int) token {
	return p.toks[min(p.pos+n, len(p.toks)-1)]
}

// next consumes and returns the next token.
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

// errorf returns a syntax error at the next token.
func (p *parser) errorf(format string, args ...any) error {
	return p.errorAt(p.peek(), fmt.Sprintf(format, args...))
}

// errorAt returns a syntax error at token t.
func (p *parser) errorAt(t token, msg string) error {
	return &SyntaxError{Offset: t.pos, Near: shorten(p.src[t.pos:t.end]), Msg: msg}
}

// enter records one more level of nesting at token t, failing past
// MaxDepth; leave undoes it.
func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > MaxDepth {
		err := p.errorAt(t, fmt.Sprintf("parentheses and NOTs nest more than %d deep", MaxDepth)).(*SyntaxError)
		err.tooComplex = true
		return err
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// condition parses term { OR term }.
func (p *parser) condition() (node, error) {
	var terms []node
	for {
		t, err := p.term()
		if err != nil {
			return nil, err
		}
		if or, ok := t.(*orNode); ok { // from parentheses: (a OR b) OR c
			terms = append(terms, or.terms...)
		} else {
			terms = append(terms, t)
		}
		if !p.peek().is("OR") {
			break
		}
		p.next()
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return &orNode{terms: terms}, nil
}

// term parses factor { AND factor }.
func (p *parser) term() (node, error) {
	var factors []node
	for {
		f, err := p.factor()
		if err != nil {
			return nil, err
		}
		if and, ok := f.(*andNode); ok { // from parentheses: (a AND b) AND c
			factors = append(factors, and.terms...)
		} else {
			factors = append(factors, f)
		}
		if !p.peek().is("AND") {
			break
		}
		p.next()
	}
	if len(factors) == 1 {
		return factors[0], nil
	}
	return &andNode{terms: factors}, nil
}

// factor parses NOT factor, ( condition ) or a predicate.
func (p *parser) factor() (node, error) {
	t := p.peek()
	switch {
	case t.is("NOT"):
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.factor()
		if err != nil {
			return nil, err
		}
		return &notNode{x: x}, nil
	case t.kind == tokLParen:
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		if p.peek().kind == tokRParen {
			return nil, p.errorf("empty parentheses; expected a condition inside")
		}
		x, err := p.condition()
		if err != nil {
			return nil, err
		}
		if p.peek().kind != tokRParen {
			return nil, p.errorf("expected AND, OR or ')' to close the '(' at offset %d", t.pos)
		}
		p.next()
		return x, nil
	}
	return p.predicate()
}

// predicate parses a comparison, IN, LIKE or IS NULL test, or TRUE or
// FALSE alone.
func (p *parser) predicate() (node, error) {
	leftTok := p.peek()
	left, err := p.operand()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch {
	case t.kind == tokCompare:
		p.next()
		right, err := p.operand()
		if err != nil {
			return nil, err
		}
		op := parseCompareOp(t.text)
		if msg := checkComparable(left, right, op); msg != "" {
			return nil, p.errorAt(t, msg)
		}
		return &compareNode{op: op, left: left, right: right}, nil
	case t.is("NOT"):
		p.next()
		switch next := p.peek(); {
		case next.is("IN"):
			return p.in(left, true)
		case next.is("LIKE"):
			return p.like(left, leftTok, true)
		}
		return nil, p.errorf("expected IN or LIKE after NOT (NOT before a condition negates it: NOT %s = ...)", left)
	case t.is("IN"):
		return p.in(left, false)
	case t.is("LIKE"):
		return p.like(left, leftTok, false)
	case t.is("IS"):
		p.next()
		negated := false
		if p.peek().is("NOT") {
			p.next()
			negated = true
		}
		if !p.peek().is("NULL") {
			if negated {
				return nil, p.errorf("expected NULL after IS NOT")
			}
			return nil, p.errorf("expected NULL or NOT NULL after IS")
		}
		p.next()
		return &isNullNode{x: left, negated: negated}, nil
	}
	if left.kind == operandBool {
		return &constNode{value: left.boolean}, nil
	}
	msg := fmt.Sprintf("expected a comparison operator (=, <>, <, <=, >, >=), IN, LIKE or IS after %s", left)
	if left.isProperty() {
		msg += fmt.Sprintf("; a property is not a condition on its own (did you mean %s = TRUE?)", left)
	}
	return nil, p.errorAt(t, msg)
}

// operand parses a property reference or a literal.
func (p *parser) operand() (operand, error) {
	t := p.peek()
	switch t.kind {
	case tokString:
		p.next()
		return operand{kind: operandString, text: t.text}, nil
	case tokNumber:
		p.next()
		num, ok := parseNumber(t.text)
		if !ok {
			return operand{}, p.errorAt(t, "number out of range")
		}
		return operand{kind: operandNumber, text: t.text, num: num}, nil
	case tokBracket:
		p.next()
		if p.peek().kind == tokDot {
			return operand{}, p.errorf("unexpected '.': a scope is written sys. or user. without brackets, and a dot inside a name goes inside the brackets")
		}
		return operand{kind: operandApp, text: t.text}, nil
	case tokWord:
		switch {
		case t.is("TRUE"), t.is("FALSE"):
			p.next()
			return operand{kind: operandBool, boolean: t.is("TRUE")}, nil
		case t.is("NULL"):
			p.next()
			return operand{kind: operandNull}, nil
		case isKeyword(t.text):
			return operand{}, p.errorf("expected a property or a literal, found the keyword %s (a property with that name is written [%s])", strings.ToUpper(t.text), t.text)
		}
		switch after := p.peekAt(1); after.kind {
		case tokDot:
			return p.scopedProperty()
		case tokLParen:
			if strings.EqualFold(t.text, "EXISTS") {
				return operand{}, p.errorf("EXISTS is not supported; write name IS NOT NULL")
			}
			return operand{}, p.errorf("functions such as %s(...) are not supported", t.text)
		}
		p.next()
		return operand{kind: operandApp, text: t.text}, nil
	case tokEOF:
		return operand{}, p.errorf("expected a property or a literal, but the filter ends")
	}
	return operand{}, p.errorf("expected a property or a literal")
}

// scopedProperty parses scope.name, with the scope sys or user.
func (p *parser) scopedProperty() (operand, error) {
	scope := p.next()
	p.next() // the dot
	name := p.peek()
	if name.kind != tokWord && name.kind != tokBracket {
		return operand{}, p.errorf("expected a property name after %s.", scope.text)
	}
	p.next()
	switch {
	case strings.EqualFold(scope.text, "user"):
		return operand{kind: operandApp, text: name.text}, nil
	case strings.EqualFold(scope.text, "sys"):
		prop, spelling, ok := lookupSystemProperty(name.text)
		if !ok {
			return operand{}, p.errorAt(name, fmt.Sprintf("unknown system property sys.%s; the system properties are %s", name.text, systemPropertyNames))
		}
		return operand{kind: operandSystem, text: spelling, sys: prop}, nil
	}
	return operand{}, p.errorAt(scope, fmt.Sprintf("unknown scope %q: the scopes are sys and user (a name with a dot is written in brackets, [%s.%s])", scope.text, scope.text, name.text))
}

// in parses the rest of x [NOT] IN (literal, ...) from the IN keyword.
func (p *parser) in(x operand, negated bool) (node, error) {
	p.next() // IN
	if p.peek().kind != tokLParen {
		return nil, p.errorf("expected '(' and a list of values after IN")
	}
	p.next()
	if p.peek().kind == tokRParen {
		return nil, p.errorf("the IN list is empty; give at least one value")
	}
	var items []operand
	for {
		t := p.peek()
		item, err := p.operand()
		if err != nil {
			return nil, err
		}
		if item.isProperty() {
			return nil, p.errorAt(t, "an IN list holds only literals: strings, numbers, TRUE, FALSE or NULL")
		}
		if msg := checkComparable(x, item, opEqual); msg != "" {
			return nil, p.errorAt(t, msg)
		}
		items = append(items, item)
		if p.peek().kind == tokRParen {
			p.next()
			return &inNode{x: x, items: items, negated: negated}, nil
		}
		if p.peek().kind != tokComma {
			return nil, p.errorf("expected ',' or ')' in the IN list")
		}
		p.next()
	}
}

// like parses the rest of x [NOT] LIKE 'pattern' [ESCAPE 'c'] from the
// LIKE keyword.
func (p *parser) like(x operand, xTok token, negated bool) (node, error) {
	p.next() // LIKE
	if x.kind == operandNumber || x.kind == operandBool {
		return nil, p.errorAt(xTok, fmt.Sprintf("LIKE matches strings, but %s is %s", x, x.describe()))
	}
	patternTok := p.peek()
	if patternTok.kind != tokString {
		return nil, p.errorf("expected a pattern in single quotes after LIKE")
	}
	p.next()
	n := &likeNode{x: x, text: patternTok.text, negated: negated}
	var escape rune
	if p.peek().is("ESCAPE") {
		p.next()
		escTok := p.peek()
		if escTok.kind != tokString {
			return nil, p.errorf("expected an escape character in single quotes after ESCAPE")
		}
		p.next()
		r, size := utf8.DecodeRuneInString(escTok.text)
		if size == 0 || size != len(escTok.text) {
			return nil, p.errorAt(escTok, "the escape character must be exactly one character")
		}
		if r == '%' || r == '_' {
			return nil, p.errorAt(escTok, "the escape character cannot be % or _")
		}
		n.escape, escape = escTok.text, r
	}
	pattern, lerr := compileLike(patternTok.text, escape, n.escape != "")
	if lerr != nil {
		return nil, p.errorAt(patternTok, fmt.Sprintf("%s (at offset %d of the pattern)", lerr.msg, lerr.pos))
	}
	n.pattern = pattern
	return n, nil
}

// checkComparable returns why a and b cannot be compared with op, or ""
// when they can. Literals must be of the same kind (or NULL); TRUE and
// FALSE compare only with = and <>.
func checkComparable(a, b operand, op compareOp) string {
	if (a.kind == operandBool || b.kind == operandBool) && op != opEqual && op != opNotEqual {
		return fmt.Sprintf("TRUE and FALSE can be compared only with = or <>, not %s", op)
	}
	if a.isProperty() || b.isProperty() || a.kind == operandNull || b.kind == operandNull {
		return ""
	}
	if a.kind != b.kind {
		return fmt.Sprintf("cannot compare %s (%s) with %s (%s)", a.describe(), a, b.describe(), b)
	}
	return ""
}
