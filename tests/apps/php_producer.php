<?php
// The test suite's producer in another language (tests/store/test_producer_contract.py).
// It loads the PreforkProducer class of docs/howto/other-languages.md (the test copies
// it from the page to CLASS_FILE), prints the schema version (SCHEMA_VERSION_SQL, the
// reference page's statement), enqueues the job JOB_JSON describes, prints its id, and
// rings when JOB_JSON says "ring": true.
//   php php_producer.php CLASS_FILE PDO_DSN JOB_JSON   (env PRODUCER_USER, PRODUCER_PASSWORD)
require $argv[1];
$job = json_decode($argv[3], true, 512, JSON_THROW_ON_ERROR);
$pdo = new PDO($argv[2], getenv('PRODUCER_USER') ?: null, getenv('PRODUCER_PASSWORD') ?: null,
               [PDO::ATTR_TIMEOUT => 10]);
$producer = new PreforkProducer($pdo);
echo 'schema ', $pdo->query(getenv('SCHEMA_VERSION_SQL'))->fetchColumn(), "\n";
$queue = $job['queue'] ?? 'default';
echo 'id ', $producer->enqueue($job['type'], $job['payload'] ?? [], $queue, $job['key'] ?? null,
                               $job['delay'] ?? 0.0), "\n";
if (!empty($job['ring'])) {
    $producer->ring($queue);
}
