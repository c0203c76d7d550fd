package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Forever is the longest duration, time.Duration's maximum. Pass it where
// "never" is meant: a message's TimeToLive, a queue's DefaultTTL or
// DeadLetterRetention, a stream retention's MaxAge. The network API's
// durations beyond time.Duration's range (up to protobuf's 10,000 years)
// arrive as Forever.
//
// Every duration sluice takes follows one rule, in the library, the
// network API, the configuration file and the CLI alike: a negative
// duration is refused with ErrInvalidArgument and nothing is written; a
// duration that reaches Forever saturates, and means never where never has
// a meaning; a setting with a Service Bus maximum (LockDuration 5 min,
// DuplicateDetectionWindow 7 days) refuses a value past it. No stored time
// is ever negative or wrapped. Never reads back as Forever (a queue's,
// topic's or subscription's DefaultTTL and DeadLetterRetention, 0 or
// Forever when set), as Service Bus reads back TimeSpan.MaxValue. ProcessorOptions.MaxAutoLockRenewal keeps
// its documented exception: negative turns renewal off.
const Forever = store.Forever

// namedDuration is a duration with the name an error gives it.
type namedDuration struct {
	name string
	d    time.Duration
}

// checkDurations refuses negative durations, naming the first.
func checkDurations(ds ...namedDuration) error {
	for _, nd := range ds {
		if nd.d < 0 {
			return fmt.Errorf("%s %v: must not be negative (sluice.Forever means never): %w", nd.name, nd.d, ErrInvalidArgument)
		}
	}
	return nil
}
