package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var validationTests = []suiteTest{
	{"Tenant", testInvalidTenant},
	{"QueueNames", testInvalidQueueNames},
	{"Enqueue", testInvalidEnqueue},
	{"EnqueueLargest", testEnqueueLargest},
	{"Lease", testInvalidLease},
	{"Settle", testInvalidSettle},
	{"Peek", testInvalidPeek},
	{"Resubmit", testInvalidResubmit},
	{"Append", testInvalidAppend},
	{"ReadTrimInfo", testInvalidReadTrimInfo},
	{"ReadStream", testInvalidReadStream},
}

// badNames are queue names that ValidateName refuses.
var badNames = []string{
	"", strings.Repeat("a", store.MaxNameLen+1), "a b", "-a", "a-", "a/", "/a", ".a", "_a", "ü", "aü", "a\x00b", "a*b", "a\\b", "a:b",
}

func testInvalidTenant(t *testing.T, h *harness) {
	for _, tn := range []store.Tenant{
		{Service: "", Provider: "p"},
		{Service: "s", Provider: ""},
		{Service: strings.Repeat("s", store.MaxTenantNameLen+1), Provider: "p"},
		{Service: "s", Provider: strings.Repeat("p", store.MaxTenantNameLen+1)},
		{Service: "a/b", Provider: "p"},
		{Service: "s", Provider: "a/b"},
		{Service: "a b", Provider: "p"},
		{Service: "-s", Provider: "p"},
		{Service: "s", Provider: "ü"},
	} {
		_, err := h.backend.Store(tn)
		wantErr(t, fmt.Sprintf("Store(%+v)", tn), err, sluicetype.ErrInvalidName)
	}
	// The longest valid names are accepted.
	long := store.Tenant{Service: "t" + randHex(8) + strings.Repeat("s", store.MaxTenantNameLen-17), Provider: strings.Repeat("p", store.MaxTenantNameLen)}
	st := h.store(t, long)
	q := createQueue(t, t.Context(), st, store.QueueSettings{})
	enqueue(t, t.Context(), st, q, msg("m"))
}

func testInvalidQueueNames(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	for _, name := range badNames {
		check := func(op string, err error) {
			t.Helper()
			wantErr(t, fmt.Sprintf("%s(%q)", op, name), err, sluicetype.ErrInvalidName)
		}
		check("CreateQueue", st.CreateQueue(ctx, &store.QueueSettings{Name: name}))
		_, err := st.GetQueue(ctx, name)
		check("GetQueue", err)
		check("DeleteQueue", st.DeleteQueue(ctx, name))
		_, err = st.Enqueue(ctx, &store.EnqueueParams{Queue: name, Messages: msgs("m")})
		check("Enqueue", err)
		_, err = st.Lease(ctx, &store.LeaseParams{Queue: name, Max: 1, Visibility: time.Second})
		check("Lease", err)
		_, err = st.Settle(ctx, &store.SettleParams{Queue: name, Action: store.Complete, Receipts: []sluicetype.Receipt{{Seq: 1, Token: 1}}})
		check("Settle", err)
		_, err = st.Peek(ctx, &store.PeekParams{Queue: name, Max: 1})
		check("Peek", err)
		_, err = st.PeekDeadLetters(ctx, &store.PeekParams{Queue: name, Max: 1})
		check("PeekDeadLetters", err)
		_, err = st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: name, Seqs: []int64{1}})
		check("ResubmitDeadLetters", err)
		_, err = st.PurgeDeadLetters(ctx, name)
		check("PurgeDeadLetters", err)
		_, err = evict(ctx, st, name)
		check("Evict", err)
		_, err = st.QueueStats(ctx, name)
		check("QueueStats", err)
	}
	// Names at the edges of the rules are accepted and kept apart.
	for i, name := range []string{
		"a", "0", "a/b.c-d_e", strings.Repeat("x", store.MaxNameLen-4) + "/0.Z",
	} {
		createQueue(t, ctx, st, store.QueueSettings{Name: name})
		enqueue(t, ctx, st, name, msg(fmt.Sprint(i)))
		if m := peekAll(t, ctx, st, name); len(m) != 1 || string(m[0].Payload) != fmt.Sprint(i) {
			t.Fatalf("queue %q holds %+v", name, m)
		}
		if s, err := st.GetQueue(ctx, name); err != nil || s.Name != name {
			t.Fatalf("GetQueue(%q) = %+v, %v", name, s, err)
		}
	}
}

func testInvalidEnqueue(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("first"))
	big := func(n int) store.NewMessage { return store.NewMessage{Payload: make([]byte, n)} }
	many := func(n int) []store.NewMessage {
		ms := make([]store.NewMessage, n)
		for i := range ms {
			ms[i] = msg("x")
		}
		return ms
	}
	mb := store.DefaultMaxMessageBytes
	for _, c := range []struct {
		what string
		ms   []store.NewMessage
		want error
	}{
		{"no messages", nil, sluicetype.ErrInvalidArgument},
		{"payload over 1 MiB", []store.NewMessage{big(mb + 1)}, sluicetype.ErrMessageTooLarge},
		{"only the last message too large", []store.NewMessage{msg("a"), msg("b"), big(mb + 1)}, sluicetype.ErrMessageTooLarge},
		{"payload and id over 1 MiB", []store.NewMessage{{MessageID: "0123456789", Payload: make([]byte, mb-5)}}, sluicetype.ErrMessageTooLarge},
		{"payload and properties over 1 MiB", []store.NewMessage{{Properties: map[string]string{"k": "0123456789"}, Payload: make([]byte, mb-5)}}, sluicetype.ErrMessageTooLarge},
		{"1001 messages", many(store.DefaultMaxBatch + 1), sluicetype.ErrBatchTooLarge},
		{"batch over 16 MiB", []store.NewMessage{big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(mb), big(1)}, sluicetype.ErrBatchTooLarge},
		{"negative TTL on the last message", []store.NewMessage{msg("a"), {Payload: []byte("b"), TTL: -time.Second}}, sluicetype.ErrInvalidArgument},
		{"empty property key", []store.NewMessage{msg("a"), {Payload: []byte("b"), Properties: map[string]string{"": "v"}}}, sluicetype.ErrInvalidArgument},
		{"property value not UTF-8", []store.NewMessage{{Payload: []byte("b"), Properties: map[string]string{"k": "\xff"}}}, sluicetype.ErrInvalidArgument},
		{"message id too long", []store.NewMessage{{MessageID: strings.Repeat("i", store.MaxNameLen+1)}}, sluicetype.ErrInvalidArgument},
		{"session id not UTF-8", []store.NewMessage{msg("a"), {SessionID: "\xc3"}}, sluicetype.ErrInvalidArgument},
		{"content type too long", []store.NewMessage{{ContentType: strings.Repeat("c", store.MaxNameLen+1)}}, sluicetype.ErrInvalidArgument},
	} {
		_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: c.ms})
		wantErr(t, "Enqueue of "+c.what, err, c.want)
		wantSeqs(t, "messages after refused enqueue of "+c.what, messageSeqs(peekAll(t, ctx, st, q)), []int64{1})
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1})
	// No refused enqueue used up a sequence number.
	wantSeqs(t, "next enqueue", enqueue(t, ctx, st, q, msg("next")), []int64{2})
}

func testEnqueueLargest(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	// The largest message and the largest batch are accepted whole.
	payload := make([]byte, store.DefaultMaxMessageBytes)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	enqueue(t, ctx, st, q, store.NewMessage{Payload: payload})
	many := make([]store.NewMessage, store.DefaultMaxBatch)
	for i := range many {
		many[i] = msg(fmt.Sprint(i))
	}
	wantSeqs(t, "batch of 1000", enqueue(t, ctx, st, q, many...), span(2, 1001))
	l := lease(t, ctx, st, q, 1, long)
	sameContent(t, "the largest message", l[0].Message, store.NewMessage{Payload: payload})
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1000, InFlight: 1})
}

func testInvalidLease(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	for _, p := range []store.LeaseParams{
		{Max: 0, Visibility: time.Second},
		{Max: -1, Visibility: time.Second},
		{Max: store.DefaultMaxBatch + 1, Visibility: time.Second},
		{Max: 1, Visibility: 0},
		{Max: 1, Visibility: -time.Second},
		{Max: 1, Visibility: time.Microsecond},
	} {
		p.Queue = q
		_, err := st.Lease(ctx, &p)
		wantErr(t, fmt.Sprintf("Lease(max %d, visibility %v)", p.Max, p.Visibility), err, sluicetype.ErrInvalidArgument)
	}
	m := peekAll(t, ctx, st, q)
	if len(m) != 1 || m[0].State != sluicetype.StateReady || m[0].DeliveryCount != 0 {
		t.Fatalf("refused leases touched the message: %+v", m)
	}
}

func testInvalidSettle(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	ls := lease(t, ctx, st, q, 1, long)
	r := []sluicetype.Receipt{ls[0].Receipt}
	tooMany := make([]sluicetype.Receipt, store.DefaultMaxBatch+1)
	for i := range tooMany {
		tooMany[i] = sluicetype.Receipt{Seq: int64(i + 1), Token: ls[0].Receipt.Token}
	}
	for _, c := range []struct {
		what string
		p    store.SettleParams
		want error
	}{
		{"no receipts", store.SettleParams{Action: store.Complete}, sluicetype.ErrInvalidArgument},
		{"action 0", store.SettleParams{Receipts: r}, sluicetype.ErrInvalidArgument},
		{"action 99", store.SettleParams{Action: 99, Receipts: r}, sluicetype.ErrInvalidArgument},
		{"negative abandon delay", store.SettleParams{Action: store.Abandon, Delay: -time.Second, Receipts: r}, sluicetype.ErrInvalidArgument},
		{"zero extension", store.SettleParams{Action: store.Extend, Receipts: r}, sluicetype.ErrInvalidArgument},
		{"negative extension", store.SettleParams{Action: store.Extend, Extension: -time.Second, Receipts: r}, sluicetype.ErrInvalidArgument},
		{"reason too long", store.SettleParams{Action: store.DeadLetter, Reason: strings.Repeat("r", store.MaxReasonLen+1), Receipts: r}, sluicetype.ErrInvalidArgument},
		{"description too long", store.SettleParams{Action: store.DeadLetter, Description: strings.Repeat("d", store.MaxReasonLen+1), Receipts: r}, sluicetype.ErrInvalidArgument},
		{"reason not UTF-8", store.SettleParams{Action: store.DeadLetter, Reason: "\xff", Receipts: r}, sluicetype.ErrInvalidArgument},
		{"1001 receipts", store.SettleParams{Action: store.Complete, Receipts: tooMany}, sluicetype.ErrBatchTooLarge},
	} {
		c.p.Queue = q
		_, err := st.Settle(ctx, &c.p)
		wantErr(t, "Settle with "+c.what, err, c.want)
	}
	m := peekAll(t, ctx, st, q)
	if len(m) != 1 || m[0].State != sluicetype.StateLeased || !m[0].VisibleAt.Equal(ls[0].LockedUntil) {
		t.Fatalf("refused settles touched the message: %+v (lease ended at %v)", m, ls[0].LockedUntil)
	}
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("refused settles dead-lettered %v", deadSeqs(d))
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
}

func testInvalidPeek(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	for _, p := range []store.PeekParams{
		{Max: 0}, {Max: -1}, {Max: store.DefaultMaxBatch + 1}, {Max: 1, FromSeq: -1},
	} {
		p.Queue = q
		_, err := st.Peek(ctx, &p)
		wantErr(t, fmt.Sprintf("Peek(from %d, max %d)", p.FromSeq, p.Max), err, sluicetype.ErrInvalidArgument)
		_, err = st.PeekDeadLetters(ctx, &p)
		wantErr(t, fmt.Sprintf("PeekDeadLetters(from %d, max %d)", p.FromSeq, p.Max), err, sluicetype.ErrInvalidArgument)
	}
}

func testInvalidResubmit(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	deadLetterAll(t, st, q, msgs("1", "2")...)
	tooMany := make([]int64, store.DefaultMaxBatch+1)
	for i := range tooMany {
		tooMany[i] = int64(i + 1)
	}
	for _, c := range []struct {
		seqs []int64
		want error
	}{
		{nil, sluicetype.ErrInvalidArgument},
		{[]int64{1, 1}, sluicetype.ErrInvalidArgument},
		{[]int64{1, 2, 1}, sluicetype.ErrInvalidArgument},
		{tooMany, sluicetype.ErrBatchTooLarge},
	} {
		_, err := st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: c.seqs})
		wantErr(t, fmt.Sprintf("ResubmitDeadLetters of %d seqs", len(c.seqs)), err, c.want)
	}
	wantSeqs(t, "dead letters after refused resubmits", deadSeqs(deadAll(t, ctx, st, q)), []int64{1, 2})
	if m := peekAll(t, ctx, st, q); len(m) != 0 {
		t.Fatalf("refused resubmits made messages %v", messageSeqs(m))
	}
}

func testInvalidAppend(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	tooMany := recs("r", store.DefaultMaxBatch+1)
	bigRec := store.NewRecord{Namespace: "ns", Key: "k", Payload: make([]byte, store.DefaultMaxMessageBytes)}
	for _, c := range []struct {
		what string
		p    store.AppendParams
		want error
	}{
		{"negative partition", store.AppendParams{Partition: -1, Records: recs("r", 1)}, sluicetype.ErrInvalidArgument},
		{"no records", store.AppendParams{}, sluicetype.ErrInvalidArgument},
		{"1001 records", store.AppendParams{Records: tooMany}, sluicetype.ErrBatchTooLarge},
		{"empty namespace", store.AppendParams{Records: []store.NewRecord{rec("a"), {Key: "k"}}}, sluicetype.ErrInvalidName},
		{"ill-formed namespace", store.AppendParams{Records: []store.NewRecord{{Namespace: "a b", Key: "k"}}}, sluicetype.ErrInvalidName},
		{"empty key", store.AppendParams{Records: []store.NewRecord{rec("a"), {Namespace: "ns"}}}, sluicetype.ErrInvalidName},
		{"key too long", store.AppendParams{Records: []store.NewRecord{{Namespace: "ns", Key: strings.Repeat("k", store.MaxKeyLen+1)}}}, sluicetype.ErrInvalidName},
		{"key not UTF-8", store.AppendParams{Records: []store.NewRecord{{Namespace: "ns", Key: "\xff"}}}, sluicetype.ErrInvalidName},
		{"only the last record too large", store.AppendParams{Records: []store.NewRecord{rec("a"), rec("b"), bigRec}}, sluicetype.ErrMessageTooLarge},
		{"empty property key", store.AppendParams{Records: []store.NewRecord{rec("a"), {Namespace: "ns", Key: "k", Properties: map[string]string{"": "v"}}}}, sluicetype.ErrInvalidArgument},
	} {
		_, err := st.Append(ctx, &c.p)
		wantErr(t, "Append with "+c.what, err, c.want)
	}
	wantInfo(t, st, 0, store.PartitionInfo{})
	if rs := read(t, st, 0, 0, 10); len(rs) != 0 {
		t.Fatalf("refused appends wrote %v", positions(rs))
	}
	// No refused append used up a position.
	if res := appendRecs(t, st, 0, rec("ok")); res.First != 1 {
		t.Fatalf("first accepted append at position %d, want 1", res.First)
	}
}

func testInvalidReadTrimInfo(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	appendRecs(t, st, 0, recs("r", 3)...)
	for _, p := range []store.ReadParams{
		{Partition: -1, Max: 1}, {After: -1, Max: 1}, {Max: 0}, {Max: store.DefaultMaxBatch + 1},
	} {
		_, err := st.Read(ctx, &p)
		wantErr(t, fmt.Sprintf("Read(%+v)", p), err, sluicetype.ErrInvalidArgument)
	}
	_, err := st.PartitionInfo(ctx, -1)
	wantErr(t, "PartitionInfo(-1)", err, sluicetype.ErrInvalidArgument)
	for _, p := range []store.TrimConsumedParams{
		{Partition: -1, Max: 10}, {Max: 0}, {Max: -1}, {Max: 10*store.DefaultMaxBatch + 1},
	} {
		_, err := trimNow(ctx, st, &p)
		wantErr(t, fmt.Sprintf("TrimConsumed(%+v)", p), err, sluicetype.ErrInvalidArgument)
	}
	wantInfo(t, st, 0, store.PartitionInfo{Head: 3})
}

func testInvalidReadStream(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	appendRecs(t, st, 0, recs("r", 3)...)
	for _, c := range []struct {
		p    store.ReadParams
		want error
	}{
		{store.ReadParams{Namespace: "ns", Max: 1}, sluicetype.ErrInvalidArgument},
		{store.ReadParams{Key: "key", Max: 1}, sluicetype.ErrInvalidArgument},
		{store.ReadParams{Namespace: "a b", Key: "key", Max: 1}, sluicetype.ErrInvalidName},
		{store.ReadParams{Namespace: strings.Repeat("n", store.MaxNameLen+1), Key: "key", Max: 1}, sluicetype.ErrInvalidName},
		{store.ReadParams{Namespace: "ns", Key: strings.Repeat("k", store.MaxKeyLen+1), Max: 1}, sluicetype.ErrInvalidName},
		{store.ReadParams{Namespace: "ns", Key: "k\xff", Max: 1}, sluicetype.ErrInvalidName},
		{store.ReadParams{Partition: -1, Namespace: "ns", Key: "key", Max: 1}, sluicetype.ErrInvalidArgument},
		{store.ReadParams{Namespace: "ns", Key: "key", After: -1, Max: 1}, sluicetype.ErrInvalidArgument},
		{store.ReadParams{Namespace: "ns", Key: "key", Max: 0}, sluicetype.ErrInvalidArgument},
		{store.ReadParams{Namespace: "ns", Key: "key", Max: store.DefaultMaxBatch + 1}, sluicetype.ErrInvalidArgument},
	} {
		rs, err := st.Read(ctx, &c.p)
		wantErr(t, fmt.Sprintf("Read(%+.40v)", c.p), err, c.want)
		if rs != nil {
			t.Fatalf("refused Read(%+.40v) returned %d records", c.p, len(rs))
		}
	}
	// The longest names are accepted.
	ns, key := strings.Repeat("n", store.MaxNameLen), strings.Repeat("ü", store.MaxKeyLen/2)
	appendRecs(t, st, 0, streamRec(ns, key, "longest"))
	wantSeqs(t, "stream of the longest names", positions(readStream(t, st, 0, ns, key, 0, 1)), []int64{4})
}
