# coding: utf-7
# The import hides in a comment as UTF-8 reads it; as UTF-7 +AAo-from . import attention as E
