package filter

import "testing"

const benchFilter = "color = 'red' AND quantity > 10 OR sys.Subject LIKE 'order.%'"

func BenchmarkMatch(b *testing.B) {
	e, err := Parse(benchFilter)
	if err != nil {
		b.Fatal(err)
	}
	props := []Properties{
		// The first clause decides.
		{App: map[string]string{"color": "red", "quantity": "12"}},
		// The LIKE decides.
		{
			System: SystemProperties{Subject: "order.created"},
			App:    map[string]string{"color": "blue", "quantity": "12"},
		},
		// Nothing matches.
		{
			System: SystemProperties{Subject: "invoice"},
			App:    map[string]string{"color": "red", "quantity": "3"},
		},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Match(props[i%len(props)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchFilter); err != nil {
			b.Fatal(err)
		}
	}
}
