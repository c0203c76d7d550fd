package apiconv

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// A filter crosses the wire and back unchanged; a state that is none is
// refused.
func TestFilterRoundTrip(t *testing.T) {
	reason := ""
	for _, f := range []sluice.MessageFilter{
		{},
		{States: []sluice.MessageState{sluice.StateActive, sluice.StateExpired}, MessageID: "m", CorrelationID: "c", Subject: "s",
			SessionID: "x", Properties: map[string]string{"k": "v"}},
		{DeadLetterReason: &reason},
	} {
		got, err := Filter(WireFilter(f))
		if err != nil || !reflect.DeepEqual(got, f) {
			t.Errorf("Filter(WireFilter(%+v)) = %+v, %v", f, got, err)
		}
	}
	if _, err := Filter(WireFilter(sluice.MessageFilter{States: []sluice.MessageState{42}})); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("an unknown state crossed the wire: %v", err)
	}
	if _, err := Filter(&sluicev1.MessageFilter{States: []sluicev1.MessageState{sluicev1.MessageState_MESSAGE_STATE_UNSPECIFIED}}); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("an unspecified state was taken: %v", err)
	}
}
