package cli

import (
	"context"
	"fmt"
	"io"
)

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "sluice bench: not yet built")
	return ExitError
}
