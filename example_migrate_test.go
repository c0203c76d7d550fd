package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice"
)

// Migrate as a deployment step of its own, then open without migrating:
// a database at another schema version is refused with both versions.
func ExampleNewMigrator() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(dir, "sluice.db")

	_, err := sluice.Open(ctx, dsn, &sluice.Options{SkipMigrations: true})
	var sv *sluice.SchemaVersionError
	if errors.Is(err, sluice.ErrSchemaTooOld) && errors.As(err, &sv) {
		fmt.Println("before migrating: database at", sv.Database)
	}

	m, err := sluice.NewMigrator(ctx, dsn, nil)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	applied, err := m.Up(ctx)
	if err != nil {
		panic(err)
	}
	st, _ := m.Status(ctx)
	fmt.Println("applied from", applied[0].Name, "to the last:", len(applied) == len(m.List()), "- pending", len(st.Pending))

	c, err := sluice.Open(ctx, dsn, &sluice.Options{SkipMigrations: true})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println("opened without migrating")
	// Output:
	// before migrating: database at 0
	// applied from 0001_init.sql to the last: true - pending 0
	// opened without migrating
}
