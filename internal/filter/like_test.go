package filter

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// likeRegexp converts a LIKE pattern to the equivalent anchored regexp, the
// reference the matcher is tested against. It reports false when the
// pattern's escapes are malformed.
func likeRegexp(pattern string, escape rune, hasEscape bool) (*regexp.Regexp, bool) {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	runes := []rune(pattern)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case hasEscape && r == escape:
			if i+1 == len(runes) {
				return nil, false
			}
			i++
			if next := runes[i]; next != '%' && next != '_' && next != escape {
				return nil, false
			}
			b.WriteString(regexp.QuoteMeta(string(runes[i])))
		case r == '%':
			b.WriteString(`.*`)
		case r == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`)$`)
	return regexp.MustCompile(b.String()), true
}

// checkLike compares the matcher with the regexp reference on values.
func checkLike(t *testing.T, pattern string, escape rune, hasEscape bool, values ...string) {
	t.Helper()
	p, lerr := compileLike(pattern, escape, hasEscape)
	re, ok := likeRegexp(pattern, escape, hasEscape)
	if (lerr == nil) != ok {
		t.Fatalf("pattern %q escape %q: compileLike error %v, reference valid %v", pattern, escape, lerr, ok)
	}
	if !ok {
		return
	}
	for _, value := range values {
		if got, want := p.match(value), re.MatchString(value); got != want {
			t.Fatalf("%q LIKE %q (escape %q) = %v, reference %v", value, pattern, escape, got, want)
		}
	}
}

func TestLike(t *testing.T) {
	for _, tc := range []struct {
		value, pattern string
		want           bool
	}{
		{"", "", true},
		{"a", "", false},
		{"", "%", true},
		{"", "%%", true},
		{"", "_", false},
		{"abc", "abc", true},
		{"abc", "ab", false},
		{"abc", "abcd", false},
		{"abc", "a%", true},
		{"abc", "%c", true},
		{"abc", "%b%", true},
		{"abc", "%d%", false},
		{"abc", "a_c", true},
		{"abc", "___", true},
		{"abc", "____", false},
		{"abc", "__", false},
		{"abc", "_%_", true},
		{"ab", "_%_", true},
		{"a", "_%_", false},
		{"abcabc", "%abc", true},
		{"abcabd", "%abc", false},
		{"aXbXc", "a%b%c", true},
		{"aXcXb", "a%b%c", false},
		{"mississippi", "%iss%ip%", true},
		{"mississippi", "m%ss%ss%ss%i", false},
		{"mississippi", "m%ss%s%i", true},
		{"aaa", "%a%a%a%", true},
		{"aa", "%a%a%a%", false},
		{"héllo", "h_llo", true},
		{"héllo", "h%o", true},
		{"日本語", "__語", true},
		{"日本語", "_語", false},
		{"x\ny", "x_y", true},
		{"x\ny", "x%y", true},
		{"a\xffb", "a_b", true}, // an invalid byte is one character
		{"a\xff\xfeb", "a_b", false},
		{"a\xff\xfeb", "a__b", true},
		{"a\xff\xfeb", "a%", true},
		{"a\xff\xfeb", "%_b", true},
	} {
		p, lerr := compileLike(tc.pattern, 0, false)
		if lerr != nil {
			t.Fatalf("compileLike(%q): %v", tc.pattern, lerr.msg)
		}
		if got := p.match(tc.value); got != tc.want {
			t.Errorf("%q LIKE %q = %v, want %v", tc.value, tc.pattern, got, tc.want)
		}
	}
}

func TestLikeEscape(t *testing.T) {
	for _, tc := range []struct {
		value, pattern string
		escape         rune
		want           bool
	}{
		{"100%", `100!%`, '!', true},
		{"1000", `100!%`, '!', false},
		{"a_b", `a!_b`, '!', true},
		{"axb", `a!_b`, '!', false},
		{"a!b", `a!!b`, '!', true},
		{"a%b", `a\%b`, '\\', true},
		{"a%bc", `a\%b%`, '\\', true},
		{"é%", `é€%`, '€', true},
		{"éx", `é€%`, '€', false},
		{"x'y", `x''y`, '\'', true},
	} {
		p, lerr := compileLike(tc.pattern, tc.escape, true)
		if lerr != nil {
			t.Fatalf("compileLike(%q, %q): %v", tc.pattern, tc.escape, lerr.msg)
		}
		if got := p.match(tc.value); got != tc.want {
			t.Errorf("%q LIKE %q ESCAPE %q = %v, want %v", tc.value, tc.pattern, tc.escape, got, tc.want)
		}
		checkLike(t, tc.pattern, tc.escape, true, tc.value)
	}
}

// TestLikeAgainstRegexp checks the matcher against the regexp reference on
// every pattern and value over a small alphabet, up to a few characters.
func TestLikeAgainstRegexp(t *testing.T) {
	patternAlphabet := []string{"a", "é", "%", "_", "!"}
	valueAlphabet := []string{"a", "é", "!", "%"}
	var patterns, values []string
	var grow func(out *[]string, alphabet []string, prefix string, n int)
	grow = func(out *[]string, alphabet []string, prefix string, n int) {
		*out = append(*out, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(out, alphabet, prefix+c, n-1)
		}
	}
	grow(&patterns, patternAlphabet, "", 4)
	grow(&values, valueAlphabet, "", 4)
	for _, pattern := range patterns {
		checkLike(t, pattern, 0, false, values...)
		checkLike(t, pattern, '!', true, values...)
	}

	// And longer random ones.
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(alphabet []string, n int) string {
		var b strings.Builder
		for range rng.IntN(n + 1) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 20000 {
		checkLike(t, random(patternAlphabet, 10), '!', true, random(valueAlphabet, 20))
	}
}

// TestLikeLinear checks that patterns that make backtracking matchers
// explode are fast.
func TestLikeLinear(t *testing.T) {
	value := strings.Repeat("a", 100_000)
	pattern := strings.Repeat("%a", 300) + "%b"
	p, lerr := compileLike(pattern, 0, false)
	if lerr != nil {
		t.Fatal(lerr.msg)
	}
	start := time.Now()
	if p.match(value) {
		t.Fatal("matched")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("match took %v", d)
	}
	// The worst case: every place is tried, each for the whole segment.
	p, _ = compileLike("%"+strings.Repeat("_", 300)+"b%", 0, false)
	start = time.Now()
	if p.match(value) {
		t.Fatal("matched")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("match took %v", d)
	}
}

// FuzzLike checks the matcher against the regexp reference.
func FuzzLike(f *testing.F) {
	for _, seed := range []struct{ pattern, value string }{
		{"a%", "abc"}, {"%b%", "abc"}, {"_", "é"}, {"a!%", "a%"}, {"%a%a%b", "aaaa"},
		{"!!", "!"}, {"%__%", "xyz"}, {"x%y_z", "xQQyQz"}, {"", ""},
	} {
		f.Add(seed.pattern, seed.value, false)
		f.Add(seed.pattern, seed.value, true)
	}
	f.Fuzz(func(t *testing.T, pattern, value string, withEscape bool) {
		if !utf8.ValidString(pattern) {
			return // Parse rejects filters that are not UTF-8
		}
		if !utf8.ValidString(value) {
			// The reference reads invalid bytes as U+FFFD; only check
			// that the matcher copes.
			if p, lerr := compileLike(pattern, '!', withEscape); lerr == nil {
				p.match(value)
			}
			return
		}
		checkLike(t, pattern, '!', withEscape, value)
	})
}
