"""dynamodb.engine bulkPutItems: the hand-off after the Map (StartBulkPut, PollBulkPut)."""
