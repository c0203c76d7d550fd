package apiconv

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
)

// Durations from the wire saturate at time.Duration's range: protobuf's
// maximum is sluice.Forever, its minimum the most negative duration (which
// every edge refuses as negative).
func TestDurationEdges(t *testing.T) {
	for _, tc := range []struct {
		in   *durationpb.Duration
		want time.Duration
	}{
		{nil, 0},
		{&durationpb.Duration{}, 0},
		{&durationpb.Duration{Nanos: 1}, time.Nanosecond},
		{&durationpb.Duration{Seconds: -1}, -time.Second},
		{&durationpb.Duration{Seconds: 315576000000, Nanos: 999999999}, sluice.Forever},
		{&durationpb.Duration{Seconds: 9223372036, Nanos: 854775807}, sluice.Forever},
		{&durationpb.Duration{Seconds: -315576000000, Nanos: -999999999}, math.MinInt64},
	} {
		if got := Duration(tc.in); got != tc.want {
			t.Errorf("Duration(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := Duration(DurationPB(sluice.Forever)); got != sluice.Forever {
		t.Errorf("Forever through the wire = %v", got)
	}
}
