package filter_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/filter"
)

func Example() {
	e, err := filter.Parse("color = 'red' and quantity > 10 or sys.Label like 'order.%'")
	if err != nil {
		panic(err)
	}
	fmt.Println(e)

	ok, err := e.Match(filter.Properties{
		System: filter.SystemProperties{Subject: "order.created"},
		App:    map[string]string{"color": "blue"},
	})
	fmt.Println(ok, err)

	_, err = e.Match(filter.Properties{App: map[string]string{"color": "red", "quantity": "many"}})
	fmt.Println(errors.Is(err, filter.ErrEvaluation))
	fmt.Println(err)
	// Output:
	// color = 'red' AND quantity > 10 OR sys.Label LIKE 'order.%'
	// true <nil>
	// true
	// filter: evaluation failed: quantity is "many", which is not a number (compared with 10)
}

func ExampleParse_error() {
	_, err := filter.Parse("color = 'red' AND sys.Colour = 'x'")
	fmt.Println(errors.Is(err, filter.ErrSyntax))
	var se *filter.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Offset, se.Near)
	}
	// Output:
	// true
	// 22 Colour
}
