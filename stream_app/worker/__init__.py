"""The worker behind the Faust page: the record walk, the pipeline over the core, the
final records, the web server, and how the process waits for the cluster and ends."""
