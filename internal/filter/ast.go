package filter

import "strings"

// Expr is a parsed filter. It is immutable and safe for concurrent use.
type Expr struct {
	root      node
	canonical string
}

// String returns the filter's canonical form: keywords in upper case,
// single spaces, != written <>, user. dropped, names bracketed only when
// they must be, and only the parentheses that precedence needs. Parsing it
// gives an equivalent Expr with the same canonical form.
func (e *Expr) String() string { return e.canonical }

// Precedence levels, lowest first; a node is parenthesized inside a
// context that needs a higher level than its own.
const (
	precOr = iota + 1
	precAnd
	precNot
	precPredicate
)

// node is a boolean node of the syntax tree. Evaluation is a type switch
// in eval.go, which keeps the properties from escaping to the heap.
type node interface {
	precedence() int
	write(b *strings.Builder)
}

// orNode is true when any term is: a OR b OR ...
type orNode struct{ terms []node }

// andNode is true when every term is: a AND b AND ...
type andNode struct{ terms []node }

// notNode negates x: NOT x.
type notNode struct{ x node }

// constNode is TRUE or FALSE used as a condition.
type constNode struct{ value bool }

// compareNode compares two operands: left op right.
type compareNode struct {
	op          compareOp
	left, right operand
}

// inNode tests membership: x [NOT] IN (items...).
type inNode struct {
	x       operand
	items   []operand
	negated bool
}

// likeNode matches a pattern: x [NOT] LIKE 'pattern' [ESCAPE 'c'].
type likeNode struct {
	x       operand
	pattern likePattern
	text    string // the pattern as written, for String
	escape  string // the escape character, or "" for none
	negated bool
}

// isNullNode tests for NULL: x IS [NOT] NULL.
type isNullNode struct {
	x       operand
	negated bool
}

func (*orNode) precedence() int      { return precOr }
func (*andNode) precedence() int     { return precAnd }
func (*notNode) precedence() int     { return precNot }
func (*constNode) precedence() int   { return precPredicate }
func (*compareNode) precedence() int { return precPredicate }
func (*inNode) precedence() int      { return precPredicate }
func (*likeNode) precedence() int    { return precPredicate }
func (*isNullNode) precedence() int  { return precPredicate }

// writeNode writes n, in parentheses when its precedence is below min.
func writeNode(b *strings.Builder, n node, min int) {
	if n.precedence() < min {
		b.WriteByte('(')
		n.write(b)
		b.WriteByte(')')
		return
	}
	n.write(b)
}

func (n *orNode) write(b *strings.Builder) {
	for i, t := range n.terms {
		if i > 0 {
			b.WriteString(" OR ")
		}
		writeNode(b, t, precAnd)
	}
}

func (n *andNode) write(b *strings.Builder) {
	for i, t := range n.terms {
		if i > 0 {
			b.WriteString(" AND ")
		}
		writeNode(b, t, precNot)
	}
}

func (n *notNode) write(b *strings.Builder) {
	b.WriteString("NOT ")
	writeNode(b, n.x, precNot)
}

func (n *constNode) write(b *strings.Builder) {
	if n.value {
		b.WriteString("TRUE")
	} else {
		b.WriteString("FALSE")
	}
}

func (n *compareNode) write(b *strings.Builder) {
	n.left.write(b)
	b.WriteByte(' ')
	b.WriteString(n.op.String())
	b.WriteByte(' ')
	n.right.write(b)
}

func (n *inNode) write(b *strings.Builder) {
	n.x.write(b)
	if n.negated {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, item := range n.items {
		if i > 0 {
			b.WriteString(", ")
		}
		item.write(b)
	}
	b.WriteByte(')')
}

func (n *likeNode) write(b *strings.Builder) {
	n.x.write(b)
	if n.negated {
		b.WriteString(" NOT")
	}
	b.WriteString(" LIKE ")
	writeQuoted(b, n.text, '\'', '\'')
	if n.escape != "" {
		b.WriteString(" ESCAPE ")
		writeQuoted(b, n.escape, '\'', '\'')
	}
}

func (n *isNullNode) write(b *strings.Builder) {
	n.x.write(b)
	if n.negated {
		b.WriteString(" IS NOT NULL")
	} else {
		b.WriteString(" IS NULL")
	}
}

// compareOp is a comparison operator.
type compareOp uint8

const (
	opEqual compareOp = iota
	opNotEqual
	opLess
	opLessOrEqual
	opGreater
	opGreaterOrEqual
)

// parseCompareOp maps an operator token's text to its compareOp.
func parseCompareOp(text string) compareOp {
	switch text {
	case "<>", "!=":
		return opNotEqual
	case "<":
		return opLess
	case "<=":
		return opLessOrEqual
	case ">":
		return opGreater
	case ">=":
		return opGreaterOrEqual
	}
	return opEqual
}

// String returns the operator's canonical spelling.
func (op compareOp) String() string {
	return [...]string{"=", "<>", "<", "<=", ">", ">="}[op]
}

// holds reports whether the operator holds for an ordering result c (<0,
// 0 or >0 as from strings.Compare).
func (op compareOp) holds(c int) bool {
	switch op {
	case opEqual:
		return c == 0
	case opNotEqual:
		return c != 0
	case opLess:
		return c < 0
	case opLessOrEqual:
		return c <= 0
	case opGreater:
		return c > 0
	default:
		return c >= 0
	}
}

// operandKind classifies an operand.
type operandKind uint8

const (
	operandApp    operandKind = iota // application property named text
	operandSystem                    // system property sys, spelled text
	operandString                    // string literal with value text
	operandNumber                    // number literal num, written text
	operandBool                      // TRUE or FALSE
	operandNull                      // NULL
)

// operand is a property reference or a literal.
type operand struct {
	kind    operandKind
	text    string
	sys     systemProperty
	num     number
	boolean bool
}

// isProperty reports whether o refers to a property.
func (o operand) isProperty() bool { return o.kind == operandApp || o.kind == operandSystem }

// describe names the kind of a literal for error messages.
func (o operand) describe() string {
	switch o.kind {
	case operandString:
		return "a string"
	case operandNumber:
		return "a number"
	case operandBool:
		return "a boolean"
	case operandNull:
		return "NULL"
	}
	return "a property"
}

// write writes the operand in canonical form.
func (o operand) write(b *strings.Builder) {
	switch o.kind {
	case operandApp:
		if isIdentifier(o.text) && !isKeyword(o.text) {
			b.WriteString(o.text)
		} else {
			writeQuoted(b, o.text, '[', ']')
		}
	case operandSystem:
		b.WriteString("sys.")
		b.WriteString(o.text)
	case operandString:
		writeQuoted(b, o.text, '\'', '\'')
	case operandNumber:
		b.WriteString(o.text)
	case operandBool:
		if o.boolean {
			b.WriteString("TRUE")
		} else {
			b.WriteString("FALSE")
		}
	case operandNull:
		b.WriteString("NULL")
	}
}

// String returns the operand in canonical form.
func (o operand) String() string {
	var b strings.Builder
	o.write(&b)
	return b.String()
}

// writeQuoted writes s between opening and closing, doubling each closing
// character inside.
func writeQuoted(b *strings.Builder, s string, opening, closing byte) {
	b.WriteByte(opening)
	for {
		i := strings.IndexByte(s, closing)
		if i < 0 {
			break
		}
		b.WriteString(s[:i+1])
		b.WriteByte(closing)
		s = s[i+1:]
	}
	b.WriteString(s)
	b.WriteByte(closing)
}
