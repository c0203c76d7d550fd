package engine

import (
	"strings"
	"testing"
)

// A dialect's optional queries must be exactly those its declared
// capabilities use: a missing one, or one no capability uses, is refused.
func TestCapabilitiesCheck(t *testing.T) {
	base := func(extra ...string) map[string]string {
		q := map[string]string{"InsertMessages": "x", "InsertRecords": "x"}
		for _, n := range extra {
			q[n] = "x"
		}
		return q
	}
	for _, c := range []struct {
		name    string
		caps    Capabilities
		queries map[string]string
		want    string // "" for no error
	}{
		{"none", Capabilities{}, base(), ""},
		{"notify", Capabilities{Notify: true}, base("Notify"), ""},
		{"notify missing", Capabilities{Notify: true}, base(), "query Notify is missing"},
		{"notify undeclared", Capabilities{}, base("Notify"), "query Notify is defined"},
		{"row inserts", Capabilities{RowInserts: true}, map[string]string{"InsertMessage": "x", "InsertRecord": "x"}, ""},
		{"row inserts with bulk ones", Capabilities{RowInserts: true}, base("InsertMessage", "InsertRecord"), "query InsertMessages is defined"},
		{"bulk inserts missing", Capabilities{}, map[string]string{"InsertRecords": "x"}, "query InsertMessages is missing"},
		{"row insert undeclared", Capabilities{}, base("InsertRecord"), "query InsertRecord is defined"},
		{"statements", Capabilities{CompleteStatement: true, EnqueueStatement: true, LeaseStatement: true, BumpHeadReturning: true, AppendStatement: true},
			base("CompleteMessages", "EnqueueMessage", "EnqueueMessages", "LeaseAlone", "BumpHeadReturning", "AppendRecord", "AppendRecords"), ""},
		{"lease statement missing", Capabilities{LeaseStatement: true}, base(), "query LeaseAlone is missing"},
	} {
		err := c.caps.check(c.queries)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// Every optional query belongs to one capability, and none is also one
// that every dialect defines.
func TestOptionalQueriesBelongToOneCapability(t *testing.T) {
	owner := map[string]string{}
	for _, cq := range capabilityQueries {
		for _, n := range append(append([]string(nil), cq.with...), cq.without...) {
			if o, dup := owner[n]; dup {
				t.Errorf("query %s belongs to capabilities %s and %s", n, o, cq.name)
			}
			owner[n] = cq.name
			if contains(queryNames, n) {
				t.Errorf("optional query %s is also required of every dialect", n)
			}
		}
	}
}
