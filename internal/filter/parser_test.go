package filter

import (
	"errors"
	"strings"
	"testing"
)

// canonicalCases are valid filters and their canonical forms.
var canonicalCases = []struct{ src, canonical string }{
	{"a=1", "a = 1"},
	{"  A   =  1  and b<>2 ", "A = 1 AND b <> 2"},
	{"a != 1", "a <> 1"},
	{"a<1 or a<=1 or a>1 or a>=1", "a < 1 OR a <= 1 OR a > 1 OR a >= 1"},
	{"user.a = 1", "a = 1"},
	{"USER.a = 1", "a = 1"},
	{"[a] = 1", "a = 1"},
	{"[a b] = 1", "[a b] = 1"},
	{"[my-prop.name] = 'x'", "[my-prop.name] = 'x'"},
	{"[a]]b] = 1", "[a]]b] = 1"},
	{"[and] = 1", "[and] = 1"},
	{"user.and = 1", "[and] = 1"},
	{"user.[x y] = 1", "[x y] = 1"},
	{"[1st] = 1", "[1st] = 1"},
	{"_x1 = 1", "_x1 = 1"},
	{"héllo = 'wörld'", "héllo = 'wörld'"},
	{"sys = 1", "sys = 1"},
	{"sys.subject = 'x'", "sys.Subject = 'x'"},
	{"SYS.LABEL = 'x'", "sys.Label = 'x'"},
	{"sys . messageid = 'x'", "sys.MessageId = 'x'"},
	{"sys.[ReplyTo] = 'x'", "sys.ReplyTo = 'x'"},
	{"((a = 1))", "a = 1"},
	{"(a = 1 OR b = 1) AND c = 1", "(a = 1 OR b = 1) AND c = 1"},
	{"a = 1 OR (b = 1 AND c = 1)", "a = 1 OR b = 1 AND c = 1"},
	{"(a = 1 OR b = 1) OR c = 1", "a = 1 OR b = 1 OR c = 1"},
	{"a = 1 AND (b = 1 AND c = 1)", "a = 1 AND b = 1 AND c = 1"},
	{"NOT (a = 1)", "NOT a = 1"},
	{"NOT (a = 1 AND b = 1)", "NOT (a = 1 AND b = 1)"},
	{"not not a = 1", "NOT NOT a = 1"},
	{"NOT a = 1 AND b = 1", "NOT a = 1 AND b = 1"},
	{"x not in ('a','b')", "x NOT IN ('a', 'b')"},
	{"NOT x IN (1)", "NOT x IN (1)"},
	{"x in (1, -2.5, 'c', TRUE, null)", "x IN (1, -2.5, 'c', TRUE, NULL)"},
	{"x like 'a%'", "x LIKE 'a%'"},
	{"x not like 'a\\%' escape '\\'", "x NOT LIKE 'a\\%' ESCAPE '\\'"},
	{"x LIKE '''%' ESCAPE ''''", "x LIKE '''%' ESCAPE ''''"},
	{"x is null", "x IS NULL"},
	{"x is not null", "x IS NOT NULL"},
	{"'it''s' = x", "'it''s' = x"},
	{"true", "TRUE"},
	{"False", "FALSE"},
	{"(TRUE)", "TRUE"},
	{"1=1", "1 = 1"},
	{"a = -5", "a = -5"},
	{"a = 2.50", "a = 2.50"},
	{"a = 1E+3", "a = 1E+3"},
	{"a = TRUE", "a = TRUE"},
	{"NULL IS NULL", "NULL IS NULL"},
	{"a = b", "a = b"},
	{"a=1\n\tAND\r\nb=2", "a = 1 AND b = 2"},
	{"color = 'red' AND quantity > 10 OR sys.Subject LIKE 'order.%'", "color = 'red' AND quantity > 10 OR sys.Subject LIKE 'order.%'"},
}

func TestParseCanonical(t *testing.T) {
	for _, tc := range canonicalCases {
		e, err := Parse(tc.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.src, err)
			continue
		}
		if got := e.String(); got != tc.canonical {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.src, got, tc.canonical)
		}
		again, err := Parse(e.String())
		if err != nil {
			t.Errorf("Parse(%q) of the canonical form: %v", e.String(), err)
			continue
		}
		if again.String() != e.String() {
			t.Errorf("canonical form of %q is not stable: %q, then %q", tc.src, e.String(), again.String())
		}
	}
}

// malformedCases are filters Parse rejects: where, and a fragment of why.
var malformedCases = []struct {
	name   string
	src    string
	offset int
	msg    string
}{
	{"empty", "", 0, "the filter is empty"},
	{"blank", "  \t ", 4, "the filter is empty"},
	{"unterminated string", "a = 'x", 4, "unterminated string"},
	{"unterminated string with escaped quote", "a = 'it''s", 4, "unterminated string"},
	{"unterminated name", "[abc = 1", 0, "unterminated name"},
	{"empty name", "[] = 1", 0, "empty property name"},
	{"missing right operand", "a =", 3, "expected a property or a literal, but the filter ends"},
	{"missing left operand", "= 1", 0, "expected a property or a literal"},
	{"missing operator", "a 1", 2, "expected a comparison operator"},
	{"bare property", "flag", 4, "a property is not a condition on its own"},
	{"bare number", "1", 1, "expected a comparison operator"},
	{"bare NULL", "NULL", 4, "expected a comparison operator"},
	{"unknown system property", "sys.Foo = 1", 4, "unknown system property sys.Foo"},
	{"missing system property name", "sys. = 1", 5, "expected a property name after sys."},
	{"unknown scope", "x.y = 1", 0, `unknown scope "x"`},
	{"bracketed scope", "[x].y = 1", 3, "unexpected '.'"},
	{"empty IN list", "a IN ()", 6, "the IN list is empty"},
	{"unterminated IN list", "a IN (1", 7, "expected ',' or ')' in the IN list"},
	{"IN list trailing comma", "a IN (1,)", 8, "expected a property or a literal"},
	{"IN without list", "a IN 1", 5, "expected '(' and a list of values after IN"},
	{"property in IN list", "a IN (b)", 6, "an IN list holds only literals"},
	{"IN list of mismatched literal", "'a' IN (1)", 8, "cannot compare a string ('a') with a number (1)"},
	{"trailing tokens", "a = 1 b = 2", 6, "expected AND, OR or the end of the filter"},
	{"unbalanced close", "a = 1)", 5, "unbalanced ')'"},
	{"unclosed paren", "(a = 1", 6, "to close the '(' at offset 0"},
	{"empty parens", "()", 1, "empty parentheses"},
	{"dangling AND", "a = 1 AND", 9, "expected a property or a literal, but the filter ends"},
	{"doubled OR", "a = 1 OR OR b = 1", 9, "found the keyword OR"},
	{"NOT alone", "NOT", 3, "expected a property or a literal, but the filter ends"},
	{"NOT without IN or LIKE", "a NOT = 1", 6, "expected IN or LIKE after NOT"},
	{"IS without NULL", "a IS 1", 5, "expected NULL or NOT NULL after IS"},
	{"IS NOT without NULL", "a IS NOT 1", 9, "expected NULL after IS NOT"},
	{"LIKE without string", "a LIKE 5", 7, "expected a pattern in single quotes after LIKE"},
	{"LIKE on a number", "5 LIKE 'x'", 0, "LIKE matches strings, but 5 is a number"},
	{"LIKE on a boolean", "TRUE LIKE 'x'", 0, "LIKE matches strings"},
	{"ESCAPE without string", "a LIKE 'x' ESCAPE", 17, "expected an escape character"},
	{"ESCAPE of two characters", "a LIKE 'x' ESCAPE 'ab'", 18, "exactly one character"},
	{"empty ESCAPE", "a LIKE 'x' ESCAPE ''", 18, "exactly one character"},
	{"ESCAPE of %", "a LIKE 'x' ESCAPE '%'", 18, "cannot be % or _"},
	{"pattern ends with escape", "a LIKE 'x!' ESCAPE '!'", 7, "ends with the escape character"},
	{"escape before ordinary character", "a LIKE 'x!y' ESCAPE '!'", 7, "must be followed by %, _ or itself"},
	{"string compared with number", "'a' = 1", 4, "cannot compare a string ('a') with a number (1)"},
	{"number compared with boolean", "1 = TRUE", 2, "cannot compare a number"},
	{"boolean ordered", "a < TRUE", 2, "compared only with = or <>"},
	{"fraction without digits", "a = 1.", 4, "expected digits after the decimal point"},
	{"exponent without digits", "a = 1e", 4, "expected digits in the exponent"},
	{"number runs into letters", "a = 1abc", 4, "a number cannot run into letters"},
	{"number out of range", "a = 1e999", 4, "number out of range"},
	{"double quotes", `a = "x"`, 4, "strings are written in single quotes"},
	{"arithmetic", "a + 1 = 2", 2, "arithmetic is not supported"},
	{"lone minus", "a = - 1", 4, "arithmetic is not supported"},
	{"lone bang", "a ! 1", 2, "not equal is written <> or !="},
	{"unexpected character", "a = 1 # b", 6, "unexpected character"},
	{"keyword as property", "AND = 1", 0, "found the keyword AND"},
	{"EXISTS", "EXISTS(a)", 0, "EXISTS is not supported"},
	{"function", "upper(a) = 'X'", 0, "functions such as upper(...) are not supported"},
	{"property in parentheses", "(a) = 1", 2, "expected a comparison operator"},
	{"IS NULL on a condition", "(a = 1) IS NULL", 8, "expected AND, OR or the end of the filter"},
	{"invalid UTF-8", "a = '\xff'", 5, "not valid UTF-8"},
}

func TestParseMalformed(t *testing.T) {
	for _, tc := range malformedCases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error", tc.src, e)
			}
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) error %v does not wrap ErrSyntax", tc.src, err)
			}
			if errors.Is(err, ErrTooComplex) {
				t.Errorf("Parse(%q) error %v wraps ErrTooComplex", tc.src, err)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %v is not a *SyntaxError", tc.src, err)
			}
			if se.Offset != tc.offset {
				t.Errorf("Parse(%q) error at offset %d, want %d: %v", tc.src, se.Offset, tc.offset, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Parse(%q) error %q does not say %q", tc.src, err, tc.msg)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("(", n) + "a = 1" + strings.Repeat(")", n) }
	nots := func(n int) string { return strings.Repeat("NOT ", n) + "TRUE" }
	longString := func(n int) string { return "a = '" + strings.Repeat("x", n-6) + "'" }
	compact := strings.Repeat("a=1 OR ", 140) + "a=1" // 983 bytes, canonical 1263

	for _, tc := range []struct {
		name string
		src  string
		ok   bool
	}{
		{"MaxLength bytes", longString(MaxLength), true},
		{"MaxLength+1 bytes", longString(MaxLength + 1), false},
		{"very long", strings.Repeat("a = 1 OR ", 10000) + "a = 1", false},
		{"MaxDepth parentheses", nested(MaxDepth), true},
		{"MaxDepth+1 parentheses", nested(MaxDepth + 1), false},
		{"MaxDepth NOTs", nots(MaxDepth), true},
		{"MaxDepth+1 NOTs", nots(MaxDepth + 1), false},
		{"MaxDepth mixed", strings.Repeat("NOT (", MaxDepth/2) + "a = 1" + strings.Repeat(")", MaxDepth/2), true},
		{"MaxDepth+2 mixed", strings.Repeat("NOT (", MaxDepth/2+1) + "a = 1" + strings.Repeat(")", MaxDepth/2+1), false},
		{"canonical form too long", compact, false},
		{"many terms flat", strings.Repeat("a=1 OR ", 100) + "a=1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if tc.ok {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if _, err := Parse(e.String()); err != nil {
					t.Fatalf("Parse of the canonical form: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want an error")
			}
			if !errors.Is(err, ErrSyntax) || !errors.Is(err, ErrTooComplex) {
				t.Fatalf("error %v should wrap ErrSyntax and ErrTooComplex", err)
			}
		})
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := Parse("color = 'red' AND quantity >")
	want := `filter: syntax error at offset 28 (end of filter): expected a property or a literal, but the filter ends`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	_, err = Parse("color = 'red' ANDD quantity > 1")
	want = `filter: syntax error at offset 14 (near "ANDD"): expected AND, OR or the end of the filter`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}
