package cli

// The sluice binary opens every kind of database, so it links every
// backend; a program that embeds the library imports only its own.
import (
	_ "github.com/sluicehq/sluice/store/mysql"
	_ "github.com/sluicehq/sluice/store/postgres"
	_ "github.com/sluicehq/sluice/store/sqlite"
)
