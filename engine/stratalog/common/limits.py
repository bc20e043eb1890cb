"""The integer ranges of Kafka's protocol and file formats, named once for every layer."""

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
