-- Queries of the migration status, which reads without migrating.

-- name: MigrationsTableExists
-- 1 when the migrations table exists, else 0.
SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'sluice_migrations';
