"""The status numbers of sift_status (include/sift.h); SiftError.status is one."""
from enum import IntEnum


class Status(IntEnum):

    OK = 0
    ARG = 1
    NOMEM = 2
    LIMIT = 3
    STATE = 4
    IO = 5
    TOKEN = 6
    ROW_VALUE = 10
    NO_CANDIDATE = 11
    SLICE = 20
    NEED_ROW = 21
    HOOK = 22
    SLICE_MISMATCH = 23
    GRAMMAR_SYNTAX = 30
    GRAMMAR_UNDEFINED = 31
    GRAMMAR_LEFT_RECURSION = 32
    GRAMMAR_LIMIT = 33
    GRAMMAR_DEAD = 34
    GRAMMAR_REJECT = 35
    PATTERN_SYNTAX = 40
    PATTERN_LIMIT = 41
    CONFIG_SYNTAX = 50
    CONFIG_TYPE = 51
    CONFIG_KEY = 52
    CONFIG_VALUE = 53
    CONFIG_LIMIT = 54
    SCHEMA_SYNTAX = 60
    SCHEMA_UNSUPPORTED = 61
    SCHEMA_LIMIT = 62


globals().update(Status.__members__)
