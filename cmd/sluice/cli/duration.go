package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// parseDuration reads a duration of the configuration file, the
// environment or a flag ("90s", "1h30m") by the rule every edge of sluice
// follows (see sluice.Forever): a negative one is refused; one too long
// for time.Duration (about 292 years) saturates to sluice.Forever, which
// means never where never has a meaning.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && overflows(s):
		if strings.HasPrefix(s, "-") {
			return 0, fmt.Errorf("duration %q: must not be negative", s)
		}
		return sluice.Forever, nil
	case err != nil:
		return 0, fmt.Errorf("duration %q: want a number and a unit, like \"90s\" or \"1h30m\"", s)
	case d < 0:
		return 0, fmt.Errorf("duration %q: must not be negative", s)
	}
	return d, nil
}

// durationSyntax is what time.ParseDuration accepts, whatever the size.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// overflows says a duration ParseDuration refused is well formed: it was
// refused for its size.
func overflows(s string) bool {
	return durationSyntax.MatchString(s)
}

// durationValue is a flag holding a duration read by parseDuration.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// formatDuration writes d as the API's JSON does (protobuf's Duration):
// seconds with the fraction it needs in 3, 6 or 9 digits, "60s",
// "0.250s", and sluice.Forever as "9223372036.854775807s".
func formatDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d // d > math.MinInt64: no duration of sluice's is
	}
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	frac := ""
	switch {
	case nanos == 0:
	case nanos%1e6 == 0:
		frac = fmt.Sprintf(".%03d", nanos/1e6)
	case nanos%1e3 == 0:
		frac = fmt.Sprintf(".%06d", nanos/1e3)
	default:
		frac = fmt.Sprintf(".%09d", nanos)
	}
	return sign + strconv.FormatInt(secs, 10) + frac + "s"
}
