package filter

import (
	"cmp"
	"math"
	"strconv"
)

// number is a parsed numeric value: exact when it is an integer that fits
// in int64, a float64 otherwise (f is set in both cases).
type number struct {
	isInt bool
	i     int64
	f     float64
}

// parseNumber parses s as a decimal number: an optional sign, digits, an
// optional fraction and an optional exponent, with nothing around it. It
// reports false when s is not such a number or is beyond float64's range,
// and never allocates.
func parseNumber(s string) (number, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intEnd := i
	if intEnd == intStart {
		return number{}, false
	}
	isInt := true
	if i < len(s) && s[i] == '.' {
		isInt = false
		i++
		fracStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fracStart {
			return number{}, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		isInt = false
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		expStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == expStart {
			return number{}, false
		}
	}
	if i != len(s) {
		return number{}, false
	}
	if isInt {
		if n, ok := parseInt64(s[intStart:intEnd], s[0] == '-'); ok {
			return number{isInt: true, i: n, f: float64(n)}, true
		}
	}
	// The syntax is checked, so the only possible error is a range error,
	// and that only for numbers beyond float64 (which become ±Inf).
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return number{}, false
	}
	return number{f: f}, true
}

// parseInt64 parses a run of decimal digits, negated when negative, and
// reports false when it does not fit in int64.
func parseInt64(digits string, negative bool) (int64, bool) {
	const limit = uint64(math.MaxInt64) + 1 // the magnitude of MinInt64
	var u uint64
	for i := 0; i < len(digits); i++ {
		d := uint64(digits[i] - '0')
		if u > (limit-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if negative {
		return int64(-u), true // -limit wraps to MinInt64, as it should
	}
	if u == limit {
		return 0, false
	}
	return int64(u), true
}

// compareNumbers orders a and b: exactly when both are int64 integers, as
// float64 otherwise.
func compareNumbers(a, b number) int {
	if a.isInt && b.isInt {
		return cmp.Compare(a.i, b.i)
	}
	return cmp.Compare(a.f, b.f)
}
