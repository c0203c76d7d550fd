-- Queries of the migration status, which reads without migrating.

-- name: MigrationsTableExists
-- 1 when the migrations table exists in the connection's database, else 0.
SELECT COUNT(*) FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name = 'sluice_migrations';
