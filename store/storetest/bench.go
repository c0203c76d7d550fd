package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// benchPayload is the payload size of the benchmarks' messages and records.
const benchPayload = 256

// Bench runs the storage benchmarks against the backend that open returns,
// so that every backend is measured the same way:
//
//	func BenchmarkStore(b *testing.B) {
//		storetest.Bench(b, func(b *testing.B) store.Backend {
//			be, err := sqlite.Open(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
//			if err != nil {
//				b.Fatal(err)
//			}
//			b.Cleanup(func() { be.Close() })
//			return be
//		})
//	}
//
// open is called once; each benchmark works in a tenant of its own. The
// benchmarks report msgs/s or records/s beside ns/op.
func Bench(b *testing.B, open func(b *testing.B) store.Backend) {
	be := open(b)
	setup := func(b *testing.B) (context.Context, store.Store, string) {
		b.Helper()
		st, err := be.Store(newTenant())
		if err != nil {
			b.Fatalf("Store: %v", err)
		}
		q := "bench"
		if err := st.CreateQueue(b.Context(), &store.QueueSettings{Name: q}); err != nil {
			b.Fatalf("CreateQueue: %v", err)
		}
		return b.Context(), st, q
	}
	batch := func(n int) []store.NewMessage {
		ms := make([]store.NewMessage, n)
		for i := range ms {
			ms[i] = store.NewMessage{Payload: make([]byte, benchPayload), ContentType: "application/octet-stream"}
		}
		return ms
	}
	records := func(n int) []store.NewRecord {
		rs := make([]store.NewRecord, n)
		for i := range rs {
			rs[i] = store.NewRecord{Namespace: "bench", Key: "key", Payload: make([]byte, benchPayload)}
		}
		return rs
	}
	rate := func(b *testing.B, n int, unit string) {
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), unit)
	}

	enqueueBench := func(n int) func(b *testing.B) {
		return func(b *testing.B) {
			ctx, st, q := setup(b)
			p := &store.EnqueueParams{Queue: q, Messages: batch(n)}
			b.ResetTimer()
			for range b.N {
				if _, err := st.Enqueue(ctx, p); err != nil {
					b.Fatalf("Enqueue: %v", err)
				}
			}
			rate(b, n, "msgs/s")
		}
	}
	b.Run("Enqueue1", enqueueBench(1))
	b.Run("EnqueueBatch100", enqueueBench(100))

	b.Run("Enqueue1Parallel", func(b *testing.B) {
		ctx, st, q := setup(b)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			p := &store.EnqueueParams{Queue: q, Messages: batch(1)}
			for pb.Next() {
				if _, err := st.Enqueue(ctx, p); err != nil {
					b.Errorf("Enqueue: %v", err)
					return
				}
			}
		})
		rate(b, 1, "msgs/s")
	})

	b.Run("LeaseComplete32", func(b *testing.B) {
		ctx, st, q := setup(b)
		const n = 32
		for left := b.N * n; left > 0; left -= store.DefaultMaxBatch {
			if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: batch(min(left, store.DefaultMaxBatch))}); err != nil {
				b.Fatalf("Enqueue: %v", err)
			}
		}
		b.ResetTimer()
		for range b.N {
			ls, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: n, Visibility: time.Minute})
			if err != nil {
				b.Fatalf("Lease: %v", err)
			}
			if len(ls) != n {
				b.Fatalf("Lease returned %d messages, want %d", len(ls), n)
			}
			p := &store.SettleParams{Queue: q, Action: store.Complete}
			for _, l := range ls {
				p.Receipts = append(p.Receipts, l.Receipt)
			}
			if _, err := st.Settle(ctx, p); err != nil {
				b.Fatalf("Settle: %v", err)
			}
		}
		rate(b, n, "msgs/s")
	})

	appendBench := func(n int) func(b *testing.B) {
		return func(b *testing.B) {
			ctx, st, _ := setup(b)
			p := &store.AppendParams{Partition: 0, Records: records(n)}
			b.ResetTimer()
			for range b.N {
				if _, err := st.Append(ctx, p); err != nil {
					b.Fatalf("Append: %v", err)
				}
			}
			rate(b, n, "records/s")
		}
	}
	b.Run("Append1", appendBench(1))
	b.Run("AppendBatch100", appendBench(100))

	b.Run("Read100", func(b *testing.B) {
		ctx, st, _ := setup(b)
		const total, n = 10000, 100
		for i := 0; i < total; i += store.DefaultMaxBatch {
			if _, err := st.Append(ctx, &store.AppendParams{Partition: 0, Records: records(store.DefaultMaxBatch)}); err != nil {
				b.Fatalf("Append: %v", err)
			}
		}
		b.ResetTimer()
		for i := range b.N {
			after := int64(i*n) % (total - n)
			rs, err := st.Read(ctx, &store.ReadParams{Partition: 0, After: after, Max: n})
			if err != nil {
				b.Fatalf("Read: %v", err)
			}
			if len(rs) != n {
				b.Fatalf("Read returned %d records, want %d", len(rs), n)
			}
		}
		rate(b, n, "records/s")
	})
}
