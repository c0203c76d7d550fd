-- Queries of the migration status, which reads without migrating.

-- name: MigrationsTableExists
-- 1 when the migrations table exists in the connection's schema, else 0.
SELECT COUNT(*) FROM pg_catalog.pg_tables
WHERE schemaname = current_schema() AND tablename = 'sluice_migrations';
