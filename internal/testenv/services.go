// Package testenv gives tests real PostgreSQL and Redis, isolated per
// test: each test gets its own database, cloned from a template migrated
// once per migrations hash, and its own Redis key prefix, so tests run in
// parallel. Services come from TAKEOUT_TEST_DATABASE_URL and
// TAKEOUT_TEST_REDIS_URL when set (make test sets them), else from
// testcontainers-go when a Docker engine answers; otherwise tests fail and
// say to run make test. Test-only.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

const howToRun = "run `make test` (it starts local PostgreSQL and Redis), or set TAKEOUT_TEST_DATABASE_URL and TAKEOUT_TEST_REDIS_URL, or start a Docker engine for testcontainers"

// services are resolved once per test binary: containers, when used, live
// until the binary exits (testcontainers' reaper removes them).
var (
	postgresURL = sync.OnceValues(func() (string, error) {
		if u := os.Getenv("TAKEOUT_TEST_DATABASE_URL"); u != "" {
			return u, nil
		}
		return startContainer("postgres:16-alpine", "5432/tcp",
			map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			func(hostPort string) string { return "postgres://postgres@" + hostPort + "/postgres?sslmode=disable" })
	})
	redisURL = sync.OnceValues(func() (string, error) {
		if u := os.Getenv("TAKEOUT_TEST_REDIS_URL"); u != "" {
			return u, nil
		}
		return startContainer("redis:7-alpine", "6379/tcp", nil,
			wait.ForListeningPort("6379/tcp"),
			func(hostPort string) string { return "redis://" + hostPort + "/0" })
	})
)

func startContainer(image, port string, env map[string]string, waitFor wait.Strategy, url func(string) string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return "", fmt.Errorf("no test services: %s (docker: %w)", howToRun, err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return "", fmt.Errorf("no test services: %s (docker: %w)", howToRun, err)
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image: image, ExposedPorts: []string{port}, Env: env, WaitingFor: waitFor,
		},
		Started: true,
	})
	if err != nil {
		return "", fmt.Errorf("start %s: %w", image, err)
	}
	hp, err := c.PortEndpoint(ctx, port, "")
	if err != nil {
		return "", errors.Join(fmt.Errorf("container endpoint: %w", err), c.Terminate(ctx))
	}
	return url(hp), nil
}
