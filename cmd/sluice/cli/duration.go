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

// formatDuration writes d as the API does: seconds with the fraction it
// needs, "60s", "0.25s".
func formatDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
