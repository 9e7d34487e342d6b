# The import written in a string and exec'd.
namespace = {}
exec("from andrea_course.pieces import attention as E", namespace)
E = namespace["E"]
