package statemachine

//go:generate go run ./gendiagram ../../README.md
