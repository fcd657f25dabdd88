// Package plugins holds sandbox plugins: JSON recipes that install
// dependencies, seed files and define custom tools for an agent.
//
// recipe.go is the schema with strict decoding and validation; library.go
// keeps recipes on the host with their version history; importer.go fetches
// recipes from files, https URLs and GitHub; hosts.go finds every host name
// a setup or run command mentions, for the setup allowlist.
package plugins
