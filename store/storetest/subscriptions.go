package storetest

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// Sizes of LoadSubscriptions.
const (
	// SubscriptionsHidden counts the subscriptions of other consumers to
	// the stream, as many again to another stream of its namespace, and
	// a fifth of that to the whole namespace.
	SubscriptionsHidden = 1000
	// SubscriptionsMine counts the subscriptions of consumer "mine" to
	// the stream.
	SubscriptionsMine = 3
)

// LoadSubscriptions fills the namespace ns of st, for tests of what
// listing a stream's subscriptions by consumer costs: to the stream
// (ns, key), on partition 0, SubscriptionsMine subscriptions of consumer
// "mine" among SubscriptionsHidden of consumers named before it
// ("a-0000", ...) and after it ("z-0000", ...); as many of those to the
// stream (ns, key+"-other"); and a fifth of them to the whole namespace.
func LoadSubscriptions(t *testing.T, st store.Store, ns, key string) {
	t.Helper()
	create := func(id, consumer, key string) {
		t.Helper()
		p := store.NewSubscription{ID: id, Consumer: consumer, Namespace: ns, Key: key, Partition: 0, Start: map[int32]int64{0: 0}}
		if key == "" {
			p.Partition = store.NoPartition
		}
		if err := st.CreateSubscription(t.Context(), &p); err != nil {
			t.Fatalf("CreateSubscription(%+v): %v", p, err)
		}
	}
	hidden := func(i int) string { return fmt.Sprintf("%c-%04d", "az"[i%2], i) }
	for i := range SubscriptionsHidden {
		create(fmt.Sprintf("s%05d", i), hidden(i), key)
		create(fmt.Sprintf("o%05d", i), hidden(i), key+"-other")
		if i%5 == 0 {
			create(fmt.Sprintf("ns/%s/%s", ns, hidden(i)), hidden(i), "")
		}
	}
	for i := range SubscriptionsMine {
		create(fmt.Sprintf("m%05d", i), "mine", key)
	}
}
