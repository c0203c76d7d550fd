package filter

import (
	"errors"
	"testing"
)

// fuzzProperties are the messages FuzzParse matches each filter against.
var fuzzProperties = []Properties{
	{},
	testProperties,
	{
		System: SystemProperties{MessageID: "1", Subject: "a", To: "b", SessionID: "true"},
		App:    map[string]string{"a": "1", "b": "x", "c": "true", "d": "2.5", "x": "", "A": "-1e3", "[": "]"},
	},
}

func FuzzParse(f *testing.F) {
	for _, tc := range canonicalCases {
		f.Add(tc.src)
	}
	for _, tc := range malformedCases {
		f.Add(tc.src)
	}
	for _, s := range []string{
		"a = 1 AND (b <> 'x' OR NOT c IN (1, 2, NULL)) AND d LIKE '%!_%' ESCAPE '!'",
		"sys.Label NOT LIKE 'a_%' OR sys.To IS NOT NULL AND x = FALSE",
		"NOT (NOT (NOT a = b))",
		"[a]]] = '''' OR user.[b c] >= -0.5e-3",
		"a < 1 OR a <= 1 OR a > 1 OR a >= 1 OR a != 1",
		"TRUE AND FALSE OR NULL IS NULL",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrSyntax", src, err)
			}
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(src) {
				t.Fatalf("Parse(%q) error %v: bad *SyntaxError", src, err)
			}
			return
		}
		canonical := e.String()
		again, err := Parse(canonical)
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", src, canonical, err)
		}
		if again.String() != canonical {
			t.Fatalf("Parse(%q) = %q, which parses to %q", src, canonical, again.String())
		}
		for _, props := range fuzzProperties {
			got, gotErr := e.Match(props)
			want, wantErr := again.Match(props)
			if gotErr != nil && !errors.Is(gotErr, ErrEvaluation) {
				t.Fatalf("Match(%q) error %v does not wrap ErrEvaluation", src, gotErr)
			}
			if got != want || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("Match(%q) = %v, %v; Match of its canonical form %q = %v, %v", src, got, gotErr, canonical, want, wantErr)
			}
		}
	})
}
