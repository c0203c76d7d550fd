package filter

import (
	"fmt"
	"strings"
)

// Match evaluates the filter against a message's properties and reports
// whether it is TRUE (FALSE and UNKNOWN do not match). The error, if any,
// wraps ErrEvaluation: the message's properties do not fit the filter, and
// the caller dead-letters the message.
func (e *Expr) Match(m Properties) (bool, error) {
	t, err := eval(e.root, &m)
	if err != nil {
		return false, err
	}
	return t == truthTrue, nil
}

// truth is a value of SQL's three-valued logic.
type truth uint8

const (
	truthFalse truth = iota
	truthTrue
	truthUnknown
)

// truthOf converts a bool.
func truthOf(b bool) truth {
	if b {
		return truthTrue
	}
	return truthFalse
}

// not negates t; NOT UNKNOWN is UNKNOWN.
func (t truth) not() truth {
	switch t {
	case truthTrue:
		return truthFalse
	case truthFalse:
		return truthTrue
	}
	return truthUnknown
}

// negateIf negates t when negated is true.
func (t truth) negateIf(negated bool) truth {
	if negated {
		return t.not()
	}
	return t
}

// eval evaluates n. It is a type switch rather than a method of node so
// that p, which no node keeps, does not escape to the heap.
func eval(n node, p *Properties) (truth, error) {
	switch n := n.(type) {
	case *orNode:
		result := truthFalse
		for _, t := range n.terms {
			v, err := eval(t, p)
			if err != nil {
				return 0, err
			}
			if v == truthTrue {
				return truthTrue, nil
			}
			if v == truthUnknown {
				result = truthUnknown
			}
		}
		return result, nil
	case *andNode:
		result := truthTrue
		for _, t := range n.terms {
			v, err := eval(t, p)
			if err != nil {
				return 0, err
			}
			if v == truthFalse {
				return truthFalse, nil
			}
			if v == truthUnknown {
				result = truthUnknown
			}
		}
		return result, nil
	case *notNode:
		v, err := eval(n.x, p)
		return v.not(), err
	case *constNode:
		return truthOf(n.value), nil
	case *compareNode:
		return evalCompare(n, p)
	case *inNode:
		return evalIn(n, p)
	case *likeNode:
		x := resolve(&n.x, p)
		if x.kind == operandNull {
			return truthUnknown, nil
		}
		return truthOf(n.pattern.match(x.str)).negateIf(n.negated), nil
	case *isNullNode:
		return truthOf(resolve(&n.x, p).kind == operandNull).negateIf(n.negated), nil
	}
	return 0, fmt.Errorf("%w: unknown node %T", ErrEvaluation, n)
}

// value is an operand's value for one message: a property's string (kind
// operandString), NULL, or a literal.
type value struct {
	kind    operandKind
	str     string
	num     number
	boolean bool
}

// resolve returns the value of o for the message's properties p.
func resolve(o *operand, p *Properties) value {
	switch o.kind {
	case operandApp:
		if s, ok := p.App[o.text]; ok {
			return value{kind: operandString, str: s}
		}
		return value{kind: operandNull}
	case operandSystem:
		if s, ok := p.System.get(o.sys); ok {
			return value{kind: operandString, str: s}
		}
		return value{kind: operandNull}
	}
	return value{kind: o.kind, str: o.text, num: o.num, boolean: o.boolean}
}

// evalCompare evaluates left op right.
func evalCompare(n *compareNode, p *Properties) (truth, error) {
	a, b := resolve(&n.left, p), resolve(&n.right, p)
	if a.kind == operandNull || b.kind == operandNull {
		return truthUnknown, nil
	}
	c, err := order(a, b, &n.left, &n.right)
	if err != nil {
		return 0, err
	}
	return truthOf(n.op.holds(c)), nil
}

// evalIn evaluates x [NOT] IN (items...) as x = item1 OR x = item2 ...
func evalIn(n *inNode, p *Properties) (truth, error) {
	x := resolve(&n.x, p)
	if x.kind == operandNull {
		return truthUnknown, nil
	}
	result := truthFalse
	for i := range n.items {
		item := &n.items[i]
		v := resolve(item, p)
		if v.kind == operandNull {
			result = truthUnknown
			continue
		}
		c, err := order(x, v, &n.x, item)
		if err != nil {
			return 0, err
		}
		if c == 0 {
			return truthTrue.negateIf(n.negated), nil
		}
	}
	return result.negateIf(n.negated), nil
}

// order compares two non-NULL values of operands ao and bo, returning <0,
// 0 or >0. Booleans are only equal (0) or not (1). A string compared with
// a number or a boolean must parse as one, or it is an evaluation error.
func order(a, b value, ao, bo *operand) (int, error) {
	switch {
	case a.kind == operandString && b.kind == operandString:
		return strings.Compare(a.str, b.str), nil
	case a.kind == operandNumber && b.kind == operandNumber:
		return compareNumbers(a.num, b.num), nil
	case a.kind == operandBool && b.kind == operandBool:
		return boolOrder(a.boolean, b.boolean), nil
	case a.kind == operandString && b.kind == operandNumber:
		n, ok := parseNumber(a.str)
		if !ok {
			return 0, notA("number", ao, a.str, bo)
		}
		return compareNumbers(n, b.num), nil
	case a.kind == operandNumber && b.kind == operandString:
		n, ok := parseNumber(b.str)
		if !ok {
			return 0, notA("number", bo, b.str, ao)
		}
		return compareNumbers(a.num, n), nil
	case a.kind == operandString && b.kind == operandBool:
		v, ok := parseBool(a.str)
		if !ok {
			return 0, notA("boolean (true or false)", ao, a.str, bo)
		}
		return boolOrder(v, b.boolean), nil
	case a.kind == operandBool && b.kind == operandString:
		v, ok := parseBool(b.str)
		if !ok {
			return 0, notA("boolean (true or false)", bo, b.str, ao)
		}
		return boolOrder(a.boolean, v), nil
	}
	// Parse rejects comparisons of literals of different kinds.
	return 0, fmt.Errorf("%w: cannot compare %s with %s", ErrEvaluation, ao, bo)
}

// boolOrder returns 0 when a equals b and 1 otherwise.
func boolOrder(a, b bool) int {
	if a == b {
		return 0
	}
	return 1
}

// parseBool parses "true" or "false" in any (ASCII) case.
func parseBool(s string) (bool, bool) {
	switch {
	case equalFoldASCII(s, "true"):
		return true, true
	case equalFoldASCII(s, "false"):
		return false, true
	}
	return false, false
}

// equalFoldASCII reports whether s equals the lower-case ASCII word in any
// ASCII case.
func equalFoldASCII(s, word string) bool {
	if len(s) != len(word) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != word[i] && c+'a'-'A' != word[i] {
			return false
		}
	}
	return true
}

// notA returns the evaluation error of operand o, whose value s is not a
// want, compared with other.
func notA(want string, o *operand, s string, other *operand) error {
	return fmt.Errorf("%w: %s is %q, which is not a %s (compared with %s)", ErrEvaluation, o, shorten(s), want, other)
}
