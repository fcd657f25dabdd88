// Package plugins will hold sandbox plugins: JSON recipes that install
// dependencies, seed files and define custom tools for an agent. Not built
// yet.
package plugins
