CREATE TABLE unrelated (a);
