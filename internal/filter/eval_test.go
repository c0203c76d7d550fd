package filter

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// testProperties are the properties most evaluation cases run against.
var testProperties = Properties{
	System: SystemProperties{
		MessageID:   "m1",
		Subject:     "order.created",
		ContentType: "application/json",
	},
	App: map[string]string{
		"color":        "red",
		"quantity":     "12",
		"price":        "2.5",
		"big":          "9223372036854775807",
		"neg":          "-5",
		"exp":          "1e3",
		"name":         "O'Brien",
		"empty":        "",
		"flag":         "true",
		"FLAG":         "FALSE",
		"unicode":      "héllo",
		"pct":          "100%",
		"pct2":         "1000",
		"my-prop.name": "x",
		"and":          "kw",
		"a]b":          "y",
		"spaced":       " 12",
	},
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		// Comparison operators on strings.
		{"color = 'red'", true},
		{"color = 'RED'", false},
		{"color <> 'red'", false},
		{"color != 'blue'", true},
		{"color < 's'", true},
		{"color <= 'red'", true},
		{"color > 'red'", false},
		{"color >= 'rec'", true},
		{"name = 'O''Brien'", true},
		{"unicode = 'héllo'", true},
		{"empty = ''", true},
		// Numeric comparisons: the property parses as a number.
		{"quantity = 12", true},
		{"quantity > 10", true},
		{"quantity > 9", true}, // as a string, "12" < "9"
		{"quantity >= 12", true},
		{"quantity < 12", false},
		{"quantity <= 12", true},
		{"quantity <> 12", false},
		{"quantity = 12.0", true},
		{"quantity = 1.2e1", true},
		{"price > 2", true},
		{"price = 2.5", true},
		{"price < 1e1", true},
		{"exp = 1000", true},
		{"neg = -5", true},
		{"neg < 0", true},
		{"big = 9223372036854775807", true},
		{"big > 9223372036854775806", true}, // exact: as float64 they are equal
		{"10 < quantity", true},
		// String comparisons: against a string literal or a property.
		{"quantity > '9'", false},
		{"quantity < price", true}, // "12" < "2.5" as strings
		{"color = color", true},
		// Booleans.
		{"flag = TRUE", true},
		{"flag = true", true},
		{"flag <> FALSE", true},
		{"FLAG = FALSE", true},
		{"TRUE = flag", true},
		{"TRUE = TRUE", true},
		{"TRUE <> FALSE", true},
		// Literals alone.
		{"TRUE", true},
		{"FALSE", false},
		{"1 = 1", true},
		{"1 = 2", false},
		{"1.5 > 1", true},
		{"'a' < 'b'", true},
		{"NULL = NULL", false},
		{"NOT NULL = NULL", false},
		// NULL and IS NULL.
		{"missing = 1", false},
		{"NOT missing = 1", false},
		{"missing <> 1", false},
		{"missing = missing", false},
		{"missing IS NULL", true},
		{"missing IS NOT NULL", false},
		{"color IS NULL", false},
		{"color IS NOT NULL", true},
		{"empty IS NULL", false}, // an empty application property is a value
		{"NULL IS NULL", true},
		{"1 IS NULL", false},
		{"sys.To IS NULL", true}, // an empty system property is NULL
		{"sys.Subject IS NOT NULL", true},
		// Three-valued logic.
		{"missing = 1 OR TRUE", true},
		{"TRUE OR missing = 1", true},
		{"missing = 1 OR FALSE", false},
		{"NOT (missing = 1 OR FALSE)", false},
		{"missing = 1 AND FALSE", false},
		{"NOT (missing = 1 AND FALSE)", true},
		{"missing = 1 AND TRUE", false},
		{"NOT (missing = 1 AND TRUE)", false},
		{"NOT (missing = 1 OR TRUE)", false},
		{"NOT NOT missing = 1", false},
		// Precedence: NOT > AND > OR.
		{"TRUE OR TRUE AND FALSE", true},
		{"(TRUE OR TRUE) AND FALSE", false},
		{"FALSE AND TRUE OR TRUE", true},
		{"FALSE AND (TRUE OR TRUE)", false},
		{"NOT FALSE AND FALSE", false},
		{"NOT (FALSE AND FALSE)", true},
		{"NOT TRUE OR TRUE", true},
		{"NOT (TRUE OR TRUE)", false},
		{"color = 'red' AND quantity > 10 OR sys.Subject LIKE 'order.%'", true},
		{"color = 'blue' AND quantity > 10 OR sys.Subject LIKE 'x.%'", false},
		// IN.
		{"color IN ('red', 'blue')", true},
		{"color IN ('blue')", false},
		{"color NOT IN ('red')", false},
		{"color NOT IN ('blue', 'green')", true},
		{"NOT color IN ('blue')", true},
		{"quantity IN (1, 12)", true},
		{"quantity IN (12.0)", true},
		{"quantity IN ('12')", true},
		{"flag IN (TRUE)", true},
		{"color IN ('red', NULL)", true},
		{"color IN ('x', NULL)", false},     // UNKNOWN
		{"NOT color IN ('x', NULL)", false}, // still UNKNOWN
		{"color NOT IN ('x', NULL)", false}, // UNKNOWN
		{"color NOT IN ('red', NULL)", false},
		{"missing IN ('a')", false},
		{"missing NOT IN ('a')", false},
		{"color IN ('red', 1)", true}, // stops at the first equal item
		{"1 IN (2, 1)", true},
		// LIKE.
		{"sys.Subject LIKE 'order.%'", true},
		{"sys.Subject LIKE 'order._reated'", true},
		{"sys.Subject LIKE 'order.'", false},
		{"sys.Subject LIKE '%created'", true},
		{"sys.Subject LIKE '%der%'", true},
		{"sys.Subject LIKE '%'", true},
		{"sys.Subject NOT LIKE 'order%'", false},
		{"NOT sys.Subject LIKE 'x%'", true},
		{"color LIKE 'r_d'", true},
		{"color LIKE 'R_D'", false},
		{"unicode LIKE 'h_llo'", true},
		{"unicode LIKE 'h__llo'", false},
		{"empty LIKE ''", true},
		{"empty LIKE '%'", true},
		{"empty LIKE '_'", false},
		{"pct LIKE '100!%' ESCAPE '!'", true},
		{"pct2 LIKE '100!%' ESCAPE '!'", false},
		{"pct2 LIKE '100%'", true},
		{"name LIKE 'O''%'", true},
		{"missing LIKE '%'", false},
		{"missing NOT LIKE '%'", false},
		{"'abc' LIKE 'a%'", true},
		{"NULL LIKE 'a'", false},
		{"quantity LIKE '1_'", true},
		// Quoted identifiers and scopes.
		{"[my-prop.name] = 'x'", true},
		{"[and] = 'kw'", true},
		{"user.[and] = 'kw'", true},
		{"user.and = 'kw'", true},
		{"[a]]b] = 'y'", true},
		{"user.color = 'red'", true},
		{"[color] = 'red'", true},
		{"Color = 'red'", false}, // application property names are case-sensitive
		// System properties.
		{"sys.MessageId = 'm1'", true},
		{"SYS.messageid = 'm1'", true},
		{"sys.Label = 'order.created'", true},
		{"sys.ContentType = 'application/json'", true},
		{"sys.CorrelationId = 'x'", false},
		{"sys.MessageId = color", false},
	} {
		e, err := Parse(tc.filter)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.filter, err)
			continue
		}
		got, err := e.Match(testProperties)
		if err != nil {
			t.Errorf("Match(%q): %v", tc.filter, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Match(%q) = %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestMatchSystemProperties(t *testing.T) {
	props := Properties{System: SystemProperties{
		MessageID:        "v-MessageId",
		CorrelationID:    "v-CorrelationId",
		Subject:          "v-Subject",
		To:               "v-To",
		ReplyTo:          "v-ReplyTo",
		ReplyToSessionID: "v-ReplyToSessionId",
		SessionID:        "v-SessionId",
		PartitionKey:     "v-PartitionKey",
		ContentType:      "v-ContentType",
	}}
	names := []string{"MessageId", "CorrelationId", "Subject", "To", "ReplyTo", "ReplyToSessionId", "SessionId", "PartitionKey", "ContentType"}
	for _, name := range names {
		for _, spelling := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			f := "sys." + spelling + " = 'v-" + name + "'"
			e, err := Parse(f)
			if err != nil {
				t.Fatalf("Parse(%q): %v", f, err)
			}
			if ok, err := e.Match(props); !ok || err != nil {
				t.Errorf("Match(%q) = %v, %v; want true", f, ok, err)
			}
			if ok, err := e.Match(Properties{}); ok || err != nil {
				t.Errorf("Match(%q) on no properties = %v, %v; want false", f, ok, err)
			}
		}
	}
	e, err := Parse("sys.Label = 'v-Subject'")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.Match(props); !ok || err != nil {
		t.Errorf("sys.Label should be sys.Subject: %v, %v", ok, err)
	}
}

func TestMatchErrors(t *testing.T) {
	for _, tc := range []struct {
		filter string
		msg    string
	}{
		{"color > 10", `color is "red", which is not a number (compared with 10)`},
		{"10 = color", `color is "red", which is not a number (compared with 10)`},
		{"empty = 0", `empty is "", which is not a number`},
		{"spaced = 12", `spaced is " 12", which is not a number`},
		{"name > -5", `name is "O'Brien", which is not a number`},
		{"color = TRUE", `color is "red", which is not a boolean (true or false) (compared with TRUE)`},
		{"FALSE <> quantity", `quantity is "12", which is not a boolean`},
		{"color IN (1, 2)", `color is "red", which is not a number (compared with 1)`},
		{"color NOT IN ('blue', 2)", `which is not a number (compared with 2)`},
		{"sys.Subject = 5", `sys.Subject is "order.created", which is not a number`},
		{"[my-prop.name] = 1", `[my-prop.name] is "x", which is not a number`},
		{"TRUE AND color < 0", `color is "red"`},
		{"missing = 1 OR color < 0", `color is "red"`},
		{"NOT color < 0", `color is "red"`},
	} {
		e, err := Parse(tc.filter)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.filter, err)
			continue
		}
		ok, err := e.Match(testProperties)
		if err == nil {
			t.Errorf("Match(%q) = %v, want an error", tc.filter, ok)
			continue
		}
		if ok {
			t.Errorf("Match(%q) = true with an error", tc.filter)
		}
		if !errors.Is(err, ErrEvaluation) {
			t.Errorf("Match(%q) error %v does not wrap ErrEvaluation", tc.filter, err)
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Match(%q) error %q does not say %q", tc.filter, err, tc.msg)
		}
	}
}

// TestMatchShortCircuit checks that evaluation stops once the outcome is
// known, so that an operand that would fail is not reached.
func TestMatchShortCircuit(t *testing.T) {
	for _, f := range []string{
		"FALSE AND color < 0",
		"TRUE OR color < 0",
		"color = 'red' OR color < 0",
		"missing IS NULL OR color < 0",
	} {
		e, err := Parse(f)
		if err != nil {
			t.Fatalf("Parse(%q): %v", f, err)
		}
		if _, err := e.Match(testProperties); err != nil {
			t.Errorf("Match(%q): %v", f, err)
		}
	}
}

func TestMatchNilApp(t *testing.T) {
	e, err := Parse("color IS NULL AND NOT color = 'red'")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.Match(Properties{}); ok || err != nil {
		t.Errorf("Match = %v, %v; want false (NOT UNKNOWN is UNKNOWN)", ok, err)
	}
}

func TestMatchConcurrent(t *testing.T) {
	e, err := Parse("color = 'red' AND quantity > 10 OR sys.Subject LIKE 'order.%'")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if ok, err := e.Match(testProperties); !ok || err != nil {
					t.Errorf("Match = %v, %v", ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestParseNumber(t *testing.T) {
	for _, tc := range []struct {
		s     string
		ok    bool
		isInt bool
		f     float64
	}{
		{"0", true, true, 0},
		{"-0", true, true, 0},
		{"+7", true, true, 7},
		{"12", true, true, 12},
		{"9223372036854775807", true, true, 9223372036854775807},
		{"-9223372036854775808", true, true, -9223372036854775808},
		{"9223372036854775808", true, false, 9223372036854775808},
		{"-9223372036854775809", true, false, -9223372036854775809},
		{"2.5", true, false, 2.5},
		{"1e3", true, false, 1000},
		{"1E-2", true, false, 0.01},
		{"1e999", false, false, 0},
		{"", false, false, 0},
		{"-", false, false, 0},
		{".5", false, false, 0},
		{"5.", false, false, 0},
		{"1e", false, false, 0},
		{" 1", false, false, 0},
		{"1 ", false, false, 0},
		{"0x10", false, false, 0},
		{"1_000", false, false, 0},
		{"NaN", false, false, 0},
		{"Inf", false, false, 0},
		{"--1", false, false, 0},
	} {
		n, ok := parseNumber(tc.s)
		if ok != tc.ok || ok && (n.isInt != tc.isInt || n.f != tc.f) {
			t.Errorf("parseNumber(%q) = %+v, %v; want isInt %v, f %v, ok %v", tc.s, n, ok, tc.isInt, tc.f, tc.ok)
		}
	}
	if n, _ := parseNumber("-9223372036854775808"); n.i != -9223372036854775808 {
		t.Errorf("parseNumber(MinInt64).i = %d", n.i)
	}
}
