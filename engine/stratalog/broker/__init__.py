"""What a broker does with a request, whatever carried it: append with acks, fetch up to the high
watermark, list offsets, delete records, topic administration and the maintenance schedule.

The HTTP server (and later the Kafka-protocol server) are thin transports over this layer.
"""
